package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
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

// ownCluster is a private Postgres cluster (privateCluster) that a test stops, crashes
// and starts again; it is stopped at the test's end.
type ownCluster struct {
	t   *testing.T
	cfg localpg.Config
	mu  sync.Mutex
	pg  *localpg.Postgres
}

// startOwnCluster starts an ownCluster, or skips the test in -short and where no
// Postgres server binaries are found.
func startOwnCluster(t *testing.T, database string, durable bool) *ownCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts and stops a private Postgres cluster")
	}
	c := &ownCluster{t: t, cfg: privateCluster(t, database, durable)}
	pg, err := localpg.Start(context.Background(), c.cfg)
	if errors.Is(err, localpg.ErrNoPostgres) {
		t.Skipf("no Postgres server binaries to start a private cluster: %v", err)
	}
	require.NoError(t, err)
	c.pg = pg
	t.Cleanup(func() { c.mu.Lock(); defer c.mu.Unlock(); _ = c.pg.Close(context.Background()) })
	return c
}

// URL is the cluster's connection URL (the same after a restart).
func (c *ownCluster) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pg.URL
}

// stop stops the cluster: a fast shutdown, or with crash a SIGKILL of its postmaster.
func (c *ownCluster) stop(crash bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if crash {
		require.NoError(c.t, c.pg.Crash(context.Background()))
		return
	}
	require.NoError(c.t, c.pg.Close(context.Background()))
}

// start starts the stopped cluster again on its folder and port.
func (c *ownCluster) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	pg, err := localpg.Start(context.Background(), c.cfg)
	require.NoError(c.t, err)
	c.pg = pg
}

// apiCall sends one API request to url as token (with an Idempotency-Key when key is
// set, a JSON body when body is) and returns its status, headers and JSON body.
func apiCall(t *testing.T, ctx context.Context, url, method, token, key, body string) (int, http.Header, map[string]any) {
	t.Helper()
	status, header, raw := apiRaw(t, ctx, url, method, token, key, body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return status, header, out
}

// apiRaw is apiCall with the answer's body as it came.
func apiRaw(t *testing.T, ctx context.Context, url, method, token, key, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}
