package tenant

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// AuthChannel is the Postgres notification channel on which every statement that
// updates or deletes tokens or tenants is announced at its commit (the
// triggers of migration 026).
const AuthChannel = "oncebox_auth_changed"

// Watch keeps the cache of a caching Store (NewCachingStore) in step with Postgres until
// ctx is done. It listens on AuthChannel over a connection of its own, made with
// connConfig, and empties the cache at each notification, so that a token revoked or
// changed by any process, the CLI or plain SQL stops working here as soon as the
// notification arrives. The cache serves only while Watch listens: until it first does,
// and from a lost connection until it listens again (retrying with a backoff up to 5
// seconds), every Authenticate asks Postgres.
func (s *Store) Watch(ctx context.Context, connConfig *pgx.ConnConfig, logger *slog.Logger) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		listened, err := s.listen(ctx, connConfig)
		s.setListening(false)
		if ctx.Err() != nil {
			return
		}
		if listened {
			delay = 100 * time.Millisecond
		}
		logger.Warn("token change notifications lost; API requests ask Postgres for every token until they are back",
			slog.Any("error", err), slog.Duration("retry_in", delay))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// listen listens on AuthChannel until its connection fails or ctx is done; listened
// reports whether it got as far as listening.
func (s *Store) listen(ctx context.Context, connConfig *pgx.ConnConfig) (listened bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, connConfig)
	cancel()
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+AuthChannel); err != nil {
		return false, err
	}
	s.setListening(true)
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, err
		}
		s.forgetCached()
	}
}

// setListening records whether Watch listens, and empties the cache either way: what was
// remembered before may have changed while nobody listened.
func (s *Store) setListening(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listening = v
	s.forgetLocked()
}
