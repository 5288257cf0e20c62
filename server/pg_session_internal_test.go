package server

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestDeadSessionsEnd: with --pg-dead-session-timeout (60 s by default) every session
// of a serve's pool tells Postgres to end it after that long idle in a transaction, to
// probe its peer within it (keepalives), to drop unacknowledged data after it and to
// look at its socket every sixth of it while a statement runs or waits for a lock; a
// setting the DATABASE_URL names wins. The connection's own socket keeps alive too.
func TestDeadSessionsEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.ConnString(t, dbtest.Schema(t))
	show := func(url string, d time.Duration) map[string]string {
		cfg, err := pgxpool.ParseConfig(url)
		require.NoError(t, err)
		bindSessions(&cfg.ConnConfig.Config, d)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		defer pool.Close()
		got := map[string]string{}
		for _, name := range []string{"idle_in_transaction_session_timeout", "client_connection_check_interval", "tcp_keepalives_idle", "tcp_keepalives_interval",
			"tcp_keepalives_count", "tcp_user_timeout"} {
			var v string
			require.NoError(t, pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v))
			got[name] = v
		}
		return got
	}
	require.Equal(t, map[string]string{"idle_in_transaction_session_timeout": "1min", "client_connection_check_interval": "10s", "tcp_keepalives_idle": "20",
		"tcp_keepalives_interval": "6", "tcp_keepalives_count": "3", "tcp_user_timeout": "30000"}, show(url, DefaultDeadSessionTimeout))
	require.Equal(t, "5s", show(url+"&idle_in_transaction_session_timeout=5000", DefaultDeadSessionTimeout)["idle_in_transaction_session_timeout"],
		"the DATABASE_URL's setting wins")
	require.Equal(t, "0", show(url, 0)["idle_in_transaction_session_timeout"], "0 leaves Postgres's own")
	require.Equal(t, DefaultDeadSessionTimeout, Defaults().DeadSessionTimeout)
}
