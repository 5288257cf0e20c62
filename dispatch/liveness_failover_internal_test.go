package dispatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/localpg"
)

// TestNoProofOfDeathAcrossAFailover: a promoted standby holds none of the old primary's
// liveness locks, and its postmaster started long before the failover. A run that began
// on the old primary (its process alive, its lock not yet taken again on the new one)
// must not look provably gone there: only a run that began at least livenessMargin
// after the last transaction the standby replayed is proven by a free lock.
func TestNoProofOfDeathAcrossAFailover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	none := func(string) (string, bool) { return "", false }
	if _, err := localpg.Probe(ctx, localpg.Config{Env: none, DisableDocker: true}); err != nil {
		t.Skip("no PostgreSQL server binaries for a private primary and standby:", err)
	}
	dir, err := os.MkdirTemp("", "dispatch-failover-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	primary, err := localpg.Start(ctx, localpg.Config{Env: none, DisableDocker: true, DataDir: filepath.Join(dir, "primary")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = primary.Close(context.WithoutCancel(ctx)) })
	standby, err := localpg.Start(ctx, localpg.Config{Env: none, DisableDocker: true, DataDir: filepath.Join(dir, "standby"),
		StandbyOf: primary.URL})
	require.NoError(t, err)
	t.Cleanup(func() { _ = standby.Close(context.WithoutCancel(ctx)) })

	// The standby's postmaster is older than livenessMargin when the run begins.
	time.Sleep(6 * time.Second)
	conn, err := pgx.Connect(ctx, primary.URL)
	require.NoError(t, err)
	var began time.Time
	_, err = conn.Exec(ctx, "CREATE TABLE run AS SELECT now() AS began")
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(ctx, "SELECT began FROM run").Scan(&began))
	_ = conn.Close(ctx)
	require.Eventually(t, func() bool {
		c, err := pgx.Connect(ctx, standby.URL)
		if err != nil {
			return false
		}
		defer c.Close(ctx)
		var n int
		return c.QueryRow(ctx, "SELECT count(*) FROM run").Scan(&n) == nil && n == 1
	}, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, primary.Crash(ctx))
	require.NoError(t, standby.Promote(ctx))

	gone := func(since time.Time) bool {
		c, err := pgx.Connect(ctx, standby.URL)
		require.NoError(t, err)
		defer c.Close(ctx)
		var gone bool
		require.NoError(t, c.QueryRow(ctx, "SELECT "+processGoneSQL("$1::text", "$2::timestamptz"), LiveClientPrefix+"alive", since).Scan(&gone))
		return gone
	}
	require.False(t, gone(began), "a run begun on the old primary is not proven gone on the promoted standby by a lock it never held")
	require.True(t, gone(began.Add(10*time.Second)), "a run begun well after the failover is proven gone by its free lock")
}
