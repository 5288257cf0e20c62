package fleet_test

import (
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/fleet"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestJoinWaitsForTheDatabase: a process that starts while its database does not
// answer (a restart, a failover) joins once it does, instead of exiting.
func TestJoinWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	ctx := t.Context()

	// A port nobody listens on for a second, then a forwarder to the database.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().(*net.TCPAddr)
	require.NoError(t, l.Close())
	cfg := pool.Config().Copy()
	target := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = "127.0.0.1", uint16(addr.Port), nil
	late, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(late.Close)
	go func() {
		time.Sleep(time.Second)
		fwd, err := net.Listen("tcp", addr.String())
		if err != nil {
			return
		}
		t.Cleanup(func() { _ = fwd.Close() })
		for {
			c, err := fwd.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				d, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer d.Close()
				go func() { _, _ = io.Copy(d, c) }()
				_, _ = io.Copy(c, d)
			}()
		}
	}()

	m, err := fleet.Join(ctx, fleet.Config{Pool: late, ID: "oncebox_live_join_test", JoinWait: 30 * time.Second})
	require.NoError(t, err, "Join waits for the database instead of failing at once")
	require.Equal(t, "oncebox_live_join_test", m.ID())
}
