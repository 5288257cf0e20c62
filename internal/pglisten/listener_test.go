package pglisten_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/pglisten"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// recorder is a Handler that remembers what it was told.
type recorder struct {
	mu        sync.Mutex
	listening bool
	starts    int
	payloads  []string
}

func (r *recorder) Listening(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listening = on
	if on {
		r.starts++
	}
}

func (r *recorder) Notified(payload string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.payloads = append(r.payloads, payload)
}

func (r *recorder) state() (bool, int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listening, r.starts, append([]string(nil), r.payloads...)
}

func notify(t *testing.T, pool *pgxpool.Pool, channel, payload string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), "SELECT pg_notify($1, $2)", channel, payload)
	require.NoError(t, err)
}

// TestOneConnectionForEveryChannel: a listener follows two channels over one
// connection, hands each notification to its channel's handler only, and when the
// connection is lost tells both, then listens again and tells both once more.
func TestOneConnectionForEveryChannel(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "pglisten_test_" + t.Name()
	l := pglisten.New(cfg, nil)
	a, b := &recorder{}, &recorder{}
	l.Handle("pglisten_a", a, "a waits")
	l.Handle("pglisten_b", b, "b waits")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	listening := func(r *recorder, starts int) func() bool {
		return func() bool { on, n, _ := r.state(); return on && n == starts }
	}
	require.Eventually(t, listening(a, 1), 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, listening(b, 1), 10*time.Second, 10*time.Millisecond)
	var conns int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", cfg.RuntimeParams["application_name"]).Scan(&conns))
	require.Equal(t, 1, conns, "one listening connection for both channels")

	notify(t, pool, "pglisten_a", "1")
	notify(t, pool, "pglisten_b", "2")
	notify(t, pool, "pglisten_a", "3")
	require.Eventually(t, func() bool { _, _, p := a.state(); return len(p) == 2 }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { _, _, p := b.state(); return len(p) == 1 }, 10*time.Second, 10*time.Millisecond)
	_, _, pa := a.state()
	_, _, pb := b.state()
	require.Equal(t, []string{"1", "3"}, pa)
	require.Equal(t, []string{"2"}, pb)

	// The connection is lost: both handlers are told, and told again once it is back.
	_, err := pool.Exec(context.Background(),
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", cfg.RuntimeParams["application_name"])
	require.NoError(t, err)
	require.Eventually(t, listening(a, 2), 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, listening(b, 2), 10*time.Second, 10*time.Millisecond)
	notify(t, pool, "pglisten_b", "4")
	require.Eventually(t, func() bool { _, _, p := b.state(); return len(p) == 2 }, 10*time.Second, 10*time.Millisecond)
}
