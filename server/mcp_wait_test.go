package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/server"
)

// TestMCPWaitsShareTheTenantCapAndWakeOnNotify: twelve MCP calls waiting on one op
// that stays pending (its target holds the request), with --max-waits-per-tenant 4:
// four wait, the other eight answer at once with the usual pending sentence, and an
// HTTP ?wait= of the tenant is refused 429 while the MCP calls hold the cap. When the
// target answers, the waiting calls answer within a second (woken by the notification,
// not a poll). The transactions committed while the calls wait are logged.
func TestMCPWaitsShareTheTenantCapAndWakeOnNotify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"t-1"}`))
	}))
	t.Cleanup(target.Close)
	t.Cleanup(free)
	h := hostileOncebox(t, `
targets:
  slow: {base_url: `+target.URL+`}
tools:
  slow.make:
    description: Make a thing slowly.
    class: write
    target: slow
    path: /things
    input_schema: {type: object, properties: {name: {type: string}}, required: [name]}
`, func(c *server.Config) {
		c.MaxWaitsPerTenant = 4
		c.MCPWait = 20 * time.Second
		c.WebhookTimeout = 30 * time.Second
		c.MaxWait = 10 * time.Second
		c.HTTPWriteTimeout = time.Minute
	})

	const calls = 12
	type answer struct {
		text string
		took time.Duration
		at   time.Time
	}
	answers := make(chan answer, calls)
	start := time.Now()
	for range calls {
		cs := mcpSession(t, h.base, h.token)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow_make", Arguments: map[string]any{"name": "x"}})
			a := answer{took: time.Since(start), at: time.Now()}
			if err == nil && len(res.Content) > 0 {
				a.text = res.Content[0].(*mcp.TextContent).Text
			}
			answers <- a
		}()
	}
	time.Sleep(time.Second)
	var before, after int64
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&before))
	time.Sleep(3 * time.Second)
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&after))
	t.Logf("%d MCP calls on one pending op, 3 s: %d transactions committed in the database (every session, other tests included)", calls, after-before)
	var quick []answer
	timeout := time.After(10 * time.Second)
	for len(quick) < calls-4 {
		select {
		case a := <-answers:
			quick = append(quick, a)
		case <-timeout:
			t.Fatalf("%d calls answered at once, want %d (the rest wait)", len(quick), calls-4)
		}
	}
	for _, a := range quick {
		require.Contains(t, a.text, "not confirmed", "the usual pending sentence: %s", a.text)
	}

	select {
	case a := <-answers:
		t.Fatalf("a fifth call answered before the op settled: %+v", a)
	default:
	}
	status, body := postJSON(t, h.base, h.token, "/v1/ops?wait=5s", "http-wait", `{"tool":"slow.make","args":{"name":"y"}}`)
	require.Equal(t, http.StatusTooManyRequests, status, "the MCP calls hold the tenant's cap: %s", body)
	require.Contains(t, body, "too-many-waits")

	settledAt := time.Now()
	free()
	waitStatus(t, h.pool, "slow.make", "succeeded")
	for range 4 {
		select {
		case a := <-answers:
			require.Contains(t, a.text, "status succeeded", a.text)
			require.Less(t, a.at.Sub(settledAt), 2*time.Second, "woken when the op settled")
		case <-time.After(5 * time.Second):
			t.Fatal("a waiting call did not answer once the op settled")
		}
	}
}
