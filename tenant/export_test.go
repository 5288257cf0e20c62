package tenant

// BeforeRememberForTest makes f run between a token check's read and its remembering.
func (s *Store) BeforeRememberForTest(f func()) { s.beforeRemember.Arm(f) }

// ListeningForTest reports whether the Store is told the process listens on AuthChannel.
func (s *Store) ListeningForTest() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listening
}

// ForgetsForTest is how many times the cache was emptied.
func (s *Store) ForgetsForTest() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forgets
}
