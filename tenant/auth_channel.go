package tenant

// AuthChannel is the Postgres notification channel on which every statement that
// updates or deletes tokens or tenants is announced at its commit (the triggers of
// migration 026). A caching Store (NewCachingStore) is its handler: give it the
// channel's notifications (serve does, with internal/pglisten) and a token revoked or
// changed by any process, the CLI or plain SQL stops working here as soon as the
// notification arrives.
const AuthChannel = "oncebox_auth_changed"

// Listening records whether the process listens on AuthChannel for this Store, and
// empties the cache either way: what was remembered before may have changed while
// nobody listened. The cache holds checks only while listening: until then, and from
// a lost connection until it listens again, every Authenticate asks Postgres.
func (s *Store) Listening(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listening = on
	s.forgetLocked()
}

// Notified empties the cache at a notification on AuthChannel: a token or a tenant
// changed somewhere.
func (s *Store) Notified(string) { s.forgetCached() }
