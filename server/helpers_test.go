package server_test

import (
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/localpg"
	"github.com/oncebox/oncebox/purge"
)

func outboxPurgeConfig() purge.Config { return purge.Config{BatchSize: 10} }

// privateCluster returns the configuration of a private Postgres cluster in a fresh
// folder on a free port (never the machine's shared one), for a test that stops or
// crashes it; durable turns fsync, synchronous_commit and full_page_writes on.
func privateCluster(t *testing.T, database string, durable bool) localpg.Config {
	t.Helper()
	dir, err := os.MkdirTemp("", "oncebox-"+database+"-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755)) // the cluster may run as an unprivileged user
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return localpg.Config{Env: func(string) (string, bool) { return "", false }, DataDir: dir + "/pgdata",
		Port: port, Database: database, DisableDocker: true, Durable: durable}
}
