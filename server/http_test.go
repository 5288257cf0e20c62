package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// runAPI runs an API-only server on a free port with cfg (adjusted by adjust) and
// returns its base URL and its schema's pool.
func runAPI(t *testing.T, adjust func(*server.Config)) (string, *pgxpool.Pool, *server.Server) {
	t.Helper()
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.Roles = server.Roles{API: true}
	if adjust != nil {
		adjust(&cfg)
	}
	srv, base := runServer(t, context.Background(), cfg)
	return base, pool, srv
}

// TestTokenRevokedElsewhereStopsAtOnce: serve may remember token checks (here for an
// hour), yet a token revoked by another process (the CLI; here a Store of its own) stops
// opening the API within moments, when Postgres announces the change.
func TestTokenRevokedElsewhereStopsAtOnce(t *testing.T) {
	t.Parallel()
	base, pool, _ := runAPI(t, func(c *server.Config) { c.AuthCacheTTL = time.Hour })
	ctx := context.Background()
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	status := func() int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/ops/no-such-key", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for range 3 {
		require.Equal(t, http.StatusNotFound, status(), "the token opens the API")
	}
	require.NoError(t, tenant.NewStore(pool).RevokeToken(ctx, token))
	require.Eventually(t, func() bool { return status() == http.StatusUnauthorized }, 5*time.Second, 20*time.Millisecond,
		"a token revoked by another process still opens the API")
}

// TestServeExportsTheAuditLog: serve wires GET /v1/audit to its database: an auditor's
// token reads its tenant's log, an agent's is refused.
func TestServeExportsTheAuditLog(t *testing.T) {
	t.Parallel()
	base, pool, _ := runAPI(t, nil)
	ctx := context.Background()
	_, agent, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	auditor, err := tenant.NewStore(pool).NewTokenWithRole(ctx, "acme", tenant.RoleAuditor)
	require.NoError(t, err)
	get := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/audit", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	status, body := get(auditor)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"kind":"setting"`, "the tenant's creation is in its log")
	status, body = get(agent)
	require.Equal(t, http.StatusForbidden, status, body)
}

// closedWithin says whether the server closes conn (after answering whatever it
// answers) within d.
func closedWithin(t *testing.T, conn net.Conn, d time.Duration) bool {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(d)))
	buf := make([]byte, 4096)
	for {
		_, err := conn.Read(buf)
		if err == nil {
			continue
		}
		return !errors.Is(err, os.ErrDeadlineExceeded)
	}
}

// TestHTTPServerTimeouts: a client that sends its body too slowly, or keeps an idle
// connection open, is disconnected after the configured timeouts.
func TestHTTPServerTimeouts(t *testing.T) {
	t.Parallel()
	base, _, _ := runAPI(t, func(c *server.Config) {
		c.HTTPReadTimeout = 300 * time.Millisecond
		c.HTTPIdleTimeout = 300 * time.Millisecond
	})
	addr := base[len("http://"):]

	// A body that never comes.
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST /v1/ops HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"))
	require.NoError(t, err)
	require.True(t, closedWithin(t, conn, 10*time.Second), "a stalled body holds the connection")

	// An idle kept-alive connection.
	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	_, err = idle.Write([]byte("GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	resp, err := bufio.NewReader(idle).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, resp, "200")
	require.True(t, closedWithin(t, idle, 10*time.Second), "an idle connection is kept forever")
}

func TestHTTPWriteTimeoutMustExceedTheLongestWait(t *testing.T) {
	t.Parallel()
	cfg, _ := newConfig(t)
	cfg.HTTPWriteTimeout = cfg.MaxWait
	_, err := server.New(context.Background(), cfg, nil)
	require.ErrorContains(t, err, "--http-write-timeout")
}

// TestRiverUIRefusesCrossOriginWrites: a cross-site page cannot make the browser of a
// logged-in operator change jobs through River UI (basic auth is replayed by browsers).
func TestRiverUIRefusesCrossOriginWrites(t *testing.T) {
	t.Parallel()
	base, _, _ := runAPI(t, func(c *server.Config) { c.AdminToken = "admin-secret" })
	send := func(method, path string, headers map[string]string) int {
		req, err := http.NewRequest(method, base+path, strings.NewReader(`{"job_ids":["1"]}`))
		require.NoError(t, err)
		req.SetBasicAuth("ops", "admin-secret")
		req.Header.Set("Content-Type", "text/plain") // what a cross-site form may send
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "same-site", "Origin": "https://sub.example"},
	} {
		require.Equal(t, http.StatusForbidden, send(http.MethodPost, "/riverui/api/jobs/cancel", h), "%v", h)
		require.Equal(t, http.StatusForbidden, send(http.MethodDelete, "/riverui/api/queues/x", h), "%v", h)
	}
	// Same origin, or no browser at all (curl), still works; reads stay open.
	host := strings.TrimPrefix(base, "http://")
	require.NotEqual(t, http.StatusForbidden, send(http.MethodPost, "/riverui/api/jobs/cancel", map[string]string{"Sec-Fetch-Site": "same-origin"}))
	require.NotEqual(t, http.StatusForbidden, send(http.MethodPost, "/riverui/api/jobs/cancel", map[string]string{"Origin": "http://" + host}))
	require.NotEqual(t, http.StatusForbidden, send(http.MethodPost, "/riverui/api/jobs/cancel", nil))
	require.Equal(t, http.StatusOK, send(http.MethodGet, "/riverui/api/queues", map[string]string{"Sec-Fetch-Site": "cross-site"}))
}

// TestMetricsCountMCPSessions: /metrics shows the open MCP sessions.
func TestMetricsCountMCPSessions(t *testing.T) {
	t.Parallel()
	base, _, _ := runAPI(t, func(c *server.Config) {
		c.WebhookTargets = map[string]webhook.Target{"hooks": {BaseURL: "http://127.0.0.1:1"}}
	})
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), "\noncebox_mcp_sessions 0\n")
	require.Contains(t, string(body), "\noncebox_store_up 1\n")
}

// runServer builds a server from cfg, listens on cfg.Addr and runs it until the test
// ends (or ctx does); it returns the server and its base URL ("" for a process without
// the API role, which has no API address).
func runServer(t *testing.T, ctx context.Context, cfg server.Config) (*server.Server, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if addr == nil {
		return srv, ""
	}
	return srv, "http://" + addr.String()
}
