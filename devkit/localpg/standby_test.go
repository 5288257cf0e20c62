//go:build unix

package localpg

import (
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestStandbyFailover: a private cluster started with Config.StandbyOf is a hot standby
// of a durable primary, synchronous once the primary names it in
// synchronous_standby_names; every commit the primary reported is on it when the
// primary is SIGKILLed; after Promote it takes writes, and a multi-host URL with
// target_session_attrs=read-write reaches it past the dead primary.
func TestStandbyFailover(t *testing.T) {
	t.Parallel()
	requireServerBinaries(t)
	ctx := t.Context()
	dir := reachableTempDir(t)
	primary := startCluster(t, Config{Env: envOf(nil), DisableDocker: true, DataDir: filepath.Join(dir, "primary"), Durable: true})
	standby := startCluster(t, Config{Env: envOf(nil), DisableDocker: true, DataDir: filepath.Join(dir, "standby"), Durable: true,
		StandbyOf: primary.URL})

	var inRecovery bool
	queryOne(t, standby.URL, "SELECT pg_is_in_recovery()", &inRecovery)
	require.True(t, inRecovery, "a standby runs in recovery")

	conn, err := pgx.Connect(ctx, primary.URL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '*'")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var state string
		err := conn.QueryRow(ctx, "SELECT coalesce(max(sync_state), '') FROM pg_stat_replication").Scan(&state)
		return err == nil && state == "sync"
	}, 30*time.Second, 100*time.Millisecond, "the standby streams synchronously")
	_, err = conn.Exec(ctx, "CREATE TABLE kept (n int)")
	require.NoError(t, err)
	for n := range 100 {
		_, err = conn.Exec(ctx, "INSERT INTO kept VALUES ($1)", n)
		require.NoError(t, err)
	}
	require.NoError(t, primary.Crash(ctx))
	_ = conn.Close(ctx)

	var rows int
	queryOne(t, standby.URL, "SELECT count(*) FROM kept", &rows)
	require.Equal(t, 100, rows, "every commit the synchronous primary reported is on the standby")
	require.NoError(t, standby.Promote(ctx))
	queryOne(t, standby.URL, "SELECT pg_is_in_recovery()", &inRecovery)
	require.False(t, inRecovery)

	p, err := url.Parse(primary.URL)
	require.NoError(t, err)
	s, err := url.Parse(standby.URL)
	require.NoError(t, err)
	both := *s
	both.Host = p.Host + "," + s.Host
	both.RawQuery = "sslmode=disable&target_session_attrs=read-write"
	queryOne(t, both.String(), "INSERT INTO kept VALUES (100) RETURNING (SELECT count(*) FROM kept)", &rows)
	require.Equal(t, 100, rows)
	require.NoError(t, standby.Close(ctx))
}
