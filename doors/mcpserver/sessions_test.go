package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/tenant"
)

// sessionEnv serves the tenant of e over HTTP with the session settings given.
func sessionEnv(t *testing.T, idle time.Duration, maxSessions int) (*env, *mcpserver.Server, *httptest.Server) {
	t.Helper()
	e := newEnv(t)
	srv, err := mcpserver.New(mcpserver.Config{Outbox: e.ob, Tenants: e.tenants, Wait: 50 * time.Millisecond,
		SessionIdleTimeout: idle, MaxSessionsPerTenant: maxSessions})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(ts.Close)
	return e, srv, ts
}

// connect opens a session with token, returning the error instead of failing.
func connect(t *testing.T, ts *httptest.Server, token string) (*mcp.ClientSession, error) {
	transport := &mcp.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), transport, sessionClient)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// TestSessionsPerTenantAreCapped: past MaxSessionsPerTenant open sessions, a tenant's
// next initialize gets a JSON-RPC error that says why; another tenant is not affected,
// and closing a session makes room.
func TestSessionsPerTenantAreCapped(t *testing.T) {
	t.Parallel()
	e, srv, ts := sessionEnv(t, time.Hour, 2)
	first, err := connect(t, ts, e.token)
	require.NoError(t, err)
	_, err = connect(t, ts, e.token)
	require.NoError(t, err)
	require.Equal(t, 2, srv.Sessions())

	_, err = connect(t, ts, e.token)
	require.Error(t, err)
	require.Contains(t, err.Error(), "too many open MCP sessions for this tenant (the limit is 2)")

	_, otherToken, err := tenant.NewStore(e.pool).Create(context.Background(), "other")
	require.NoError(t, err)
	_, err = connect(t, ts, otherToken)
	require.NoError(t, err, "another tenant's sessions are counted apart")

	require.NoError(t, first.Close())
	require.Eventually(t, func() bool { _, err := connect(t, ts, e.token); return err == nil }, 10*time.Second, 50*time.Millisecond)
}

// TestIdleSessionsAreClosed: a session that sees no request for SessionIdleTimeout is
// closed, and the count (shown in metrics) goes down.
func TestIdleSessionsAreClosed(t *testing.T) {
	t.Parallel()
	e, srv, ts := sessionEnv(t, 300*time.Millisecond, 0)
	for range 3 {
		_, err := connect(t, ts, e.token)
		require.NoError(t, err)
	}
	require.Equal(t, 3, srv.Sessions())
	require.Eventually(t, func() bool { return srv.Sessions() == 0 }, 10*time.Second, 50*time.Millisecond)
}

// TestSessionCapCountsWhatTheSDKOpens: 24 attempts to open a session, at once, each an
// initialize the SDK would act on but dressed to slip past a looser reading (a JSON-RPC
// batch, an extra "Method" key that encoding/json would match in place of "method"),
// open no more sessions than the cap; the ones past it get the JSON-RPC refusal.
func TestSessionCapCountsWhatTheSDKOpens(t *testing.T) {
	t.Parallel()
	e, srv, ts := sessionEnv(t, time.Hour, 2)
	const params = `"params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}`
	bodies := []string{
		`[{"jsonrpc":"2.0","id":1,"method":"initialize",` + params + `}]`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","Method":"ping",` + params + `}`,
		`{"jsonrpc":"2.0","id":1,"Method":"ping","method":"initialize",` + params + `}`,
		`[{"jsonrpc":"2.0","id":1,"METHOD":"ping","method":"initialize",` + params + `},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for i := range 24 {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(bodies[i%len(bodies)]))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+e.token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			if strings.Contains(string(b), "too many open MCP sessions for this tenant (the limit is 2)") {
				mu.Lock()
				refused++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 2, srv.Sessions(), "the cap holds against batches, case tricks and concurrency")
	require.Equal(t, 22, refused)
}
