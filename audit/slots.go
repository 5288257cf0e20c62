package audit

// Slots bounds the exports a process streams at once: each holds a database connection
// for as long as it streams, and the connections calls need must stay free. The API's
// export and the console's downloads share one.
type Slots struct{ c chan struct{} }

// NewSlots returns Slots for n exports at once (at least one).
func NewSlots(n int) *Slots { return &Slots{c: make(chan struct{}, max(n, 1))} }

// TryAcquire takes a slot if one is free, without waiting; call Release when the export
// ends.
func (s *Slots) TryAcquire() bool {
	select {
	case s.c <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release frees a slot TryAcquire took.
func (s *Slots) Release() { <-s.c }

// Cap is how many exports may stream at once.
func (s *Slots) Cap() int { return cap(s.c) }

// InUse is how many stream now.
func (s *Slots) InUse() int { return len(s.c) }
