package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/protocol"
)

// header adds fixed headers to every request.
type header struct {
	h    http.Header
	next http.RoundTripper
}

func (h header) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header[k] = v
	}
	return h.next.RoundTrip(r)
}

// connectURL connects a new MCP session over HTTP to url with extra headers.
func (e *env) connectURL(t *testing.T, url string, extra http.Header) *mcp.ClientSession {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + e.token}}
	for k, v := range extra {
		h[k] = v
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: header{h: h, next: http.DefaultTransport}},
		MaxRetries: -1,
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), transport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestTwoHTTPSessionsMakeOneOp: the same call from two MCP sessions over HTTP is one
// op, whether the client sends no _meta, only a tool call id, or the same conversation.
func TestTwoHTTPSessionsMakeOneOp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		meta1, meta2 mcp.Meta
	}{
		{name: "no _meta"},
		{name: "tool call ids only", meta1: mcp.Meta{mcpserver.MetaToolCallID: "call_a"}, meta2: mcp.Meta{mcpserver.MetaToolCallID: "call_b"}},
		{name: "same conversation", meta1: mcp.Meta{mcpserver.MetaConversationID: "conv-9"}, meta2: mcp.Meta{mcpserver.MetaConversationID: "conv-9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cs1, ts := e.overHTTP(t)
			cs2 := e.connectHTTP(t, ts)

			a := call(t, cs1, "stripe_payment_intent", payment(300), tc.meta1)
			b := call(t, cs2, "stripe_payment_intent", payment(300), tc.meta2)
			require.False(t, structured(t, a).Replayed)
			require.True(t, structured(t, b).Replayed, text(t, b))
			require.Equal(t, structured(t, a).ID, structured(t, b).ID)
			require.Contains(t, text(t, b), "This payment was already requested earlier and was not repeated now")
			require.Equal(t, 1, e.countOps(t))
		})
	}
}

// TestConcurrentIdenticalCallsAcrossServers: identical calls sent at once from many
// sessions of two servers (two processes) are one op.
func TestConcurrentIdenticalCallsAcrossServers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other, err := mcpserver.New(mcpserver.Config{Outbox: e.ob, Tenants: e.tenants, Wait: 50 * time.Millisecond})
	require.NoError(t, err)
	ts1 := httptest.NewServer(e.srv.HTTPHandler())
	t.Cleanup(ts1.Close)
	ts2 := httptest.NewServer(other.HTTPHandler())
	t.Cleanup(ts2.Close)

	const n = 8
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		url := ts1.URL
		if i%2 == 1 {
			url = ts2.URL
		}
		sessions[i] = e.connectURL(t, url, nil)
	}
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "stripe_payment_intent", Arguments: payment(444)})
			if err == nil && !res.IsError {
				b, _ := json.Marshal(res.StructuredContent)
				var v mcpserver.OpView
				_ = json.Unmarshal(b, &v)
				ids[i] = v.ID
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		require.NotEmpty(t, id)
		require.Equal(t, ids[0], id)
	}
	require.Equal(t, 1, e.countOps(t))
}

// TestOccurrenceAsksForADeliberateRepeat: occurrence 2 is a second op; retrying it
// is not a third; an invalid occurrence is refused; every tool offers it.
func TestOccurrenceAsksForADeliberateRepeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs1, ts := e.overHTTP(t)
	cs2 := e.connectHTTP(t, ts)

	first := structured(t, call(t, cs1, "stripe_payment_intent", payment(250), nil))
	withOcc := func(n any) map[string]any {
		a := payment(250)
		a["occurrence"] = n
		return a
	}
	one := structured(t, call(t, cs2, "stripe_payment_intent", withOcc(1), nil))
	require.True(t, one.Replayed, "occurrence 1 is the default")
	require.Equal(t, first.ID, one.ID)

	second := structured(t, call(t, cs1, "stripe_payment_intent", withOcc(2), nil))
	require.False(t, second.Replayed)
	require.NotEqual(t, first.ID, second.ID)
	retry := structured(t, call(t, cs2, "stripe_payment_intent", withOcc(2), nil))
	require.True(t, retry.Replayed, "a retry of occurrence 2 is still one op")
	require.Equal(t, second.ID, retry.ID)
	require.Equal(t, 2, e.countOps(t))

	var stored string
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT args::text FROM oncebox_op WHERE id = $1", second.ID).Scan(&stored))
	require.NotContains(t, stored, "occurrence", "occurrence is not an argument of the tool")

	for _, bad := range []any{0, -1, 1.5, "2", 1001} {
		res := call(t, cs1, "stripe_payment_intent", withOcc(bad), nil)
		require.True(t, res.IsError, "%v", bad)
		require.Contains(t, text(t, res), `Invalid argument "occurrence"`)
	}
	require.Equal(t, 2, e.countOps(t))

	list, err := cs1.ListTools(context.Background(), nil)
	require.NoError(t, err)
	for _, tool := range list.Tools {
		b, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		require.Contains(t, string(b), `"occurrence"`, tool.Name)
		require.Contains(t, tool.Description, `"occurrence"`, tool.Name)
	}
}

// TestWindowCloses: once the window of a call has closed, the same call is a new op.
func TestWindowCloses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := e.inMemory(t)
	first := structured(t, call(t, cs, "stripe_payment_intent", payment(610), nil))
	_, err := e.pool.Exec(context.Background(), "UPDATE oncebox_key_window SET closes_at = now() - interval '1 second'")
	require.NoError(t, err)
	later := structured(t, call(t, e.inMemory(t), "stripe_payment_intent", payment(610), nil))
	require.False(t, later.Replayed)
	require.NotEqual(t, first.ID, later.ID)
	again := structured(t, call(t, e.inMemory(t), "stripe_payment_intent", payment(610), nil))
	require.Equal(t, later.ID, again.ID, "the new window holds the new op")
	require.Equal(t, 2, e.countOps(t))
}

// TestWebhookHasTheDefaultWindow: webhook posts are deduplicated across sessions like
// every write tool, unless their window is turned off (then per session).
func TestWebhookHasTheDefaultWindow(t *testing.T) {
	t.Parallel()
	args := map[string]any{"target": "crm", "path": "/contacts", "body": map[string]any{"name": "Ada"}}
	e := newEnv(t)
	call(t, e.inMemory(t), "webhook_post", args, nil)
	call(t, e.inMemory(t), "webhook_post", args, nil)
	require.Equal(t, 1, e.countOps(t))
	require.Empty(t, e.srv.NoWindow())

	e = newEnvWith(t, map[string]time.Duration{protocol.ToolWebhookPost: 0})
	call(t, e.inMemory(t), "webhook_post", args, nil)
	call(t, e.inMemory(t), "webhook_post", args, nil)
	require.Equal(t, 2, e.countOps(t))
	require.Equal(t, []string{protocol.ToolWebhookPost}, e.srv.NoWindow())
}

// TestConversationHeaderAndQuery: the Oncebox-Conversation-Id header, or the
// conversation_id query parameter, names the conversation of a session's calls.
func TestConversationHeaderAndQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ts := httptest.NewServer(e.srv.HTTPHandler())
	t.Cleanup(ts.Close)

	byHeader := e.connectURL(t, ts.URL, http.Header{mcpserver.HeaderConversationID: {"conv-h"}})
	v := structured(t, call(t, byHeader, "stripe_payment_intent", payment(120), nil))
	require.Equal(t, "conv-h", v.ConversationID)
	again := structured(t, call(t, e.connectURL(t, ts.URL, http.Header{mcpserver.HeaderConversationID: {"conv-h"}}), "stripe_payment_intent", payment(120), nil))
	require.True(t, again.Replayed)

	byQuery := e.connectURL(t, ts.URL+"?conversation_id=conv-q", nil)
	q := structured(t, call(t, byQuery, "stripe_payment_intent", payment(120), nil))
	require.Equal(t, "conv-q", q.ConversationID)
	require.False(t, q.Replayed, "another conversation")

	// _meta wins over the header.
	m := structured(t, call(t, byHeader, "stripe_payment_intent", payment(120), mcp.Meta{mcpserver.MetaConversationID: "conv-m"}))
	require.Equal(t, "conv-m", m.ConversationID)
	require.Equal(t, 3, e.countOps(t))
}

// TestHTTP401HasChallenge: every 401 of /mcp carries WWW-Authenticate: Bearer.
func TestHTTP401HasChallenge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ts := httptest.NewServer(e.srv.HTTPHandler())
	t.Cleanup(ts.Close)
	for _, auth := range []string{"", "Bearer obx_not-a-token", "Basic abc"} {
		req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.True(t, strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer"), auth)
	}
}
