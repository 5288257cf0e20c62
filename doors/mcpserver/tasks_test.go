package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/mcpserver"
)

// recorder is bearer that also keeps the body of every response to a POST.
type recorder struct {
	bearer
	mu     sync.Mutex
	bodies []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.bearer.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		return resp, err // a GET is the standalone stream, which does not end
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.mu.Unlock()
	return resp, nil
}

// TestTasksOnlyForClientsThatDeclareThem: a session client (2025-11-25) that declares
// the tasks extension at initialize gets a task for a payment, which tasks/get reads
// over the same handler; over stdio (MCPServer), where tasks/get cannot be answered,
// a client that declares it gets the tool result; initialize lists the extension over
// HTTP only.
func TestTasksOnlyForClientsThatDeclareThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	caps := &mcp.ClientCapabilities{Extensions: map[string]any{mcpserver.ExtensionTasks: map[string]any{}}}
	args := map[string]any{"amount": 4200, "currency": "usd"}

	ts := httptest.NewServer(e.srv.HTTPHandler())
	t.Cleanup(ts.Close)
	rec := &recorder{bearer: bearer{token: e.token, next: http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tasks", Version: "1"}, &mcp.ClientOptions{Capabilities: caps}).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: &http.Client{Transport: rec}, MaxRetries: -1}, sessionClient)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	require.Contains(t, cs.InitializeResult().Capabilities.Extensions, mcpserver.ExtensionTasks)
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "stripe_payment_intent", Arguments: args})
	require.NoError(t, err)
	rec.mu.Lock()
	last := rec.bodies[len(rec.bodies)-1]
	rec.mu.Unlock()
	require.Contains(t, last, `"resultType":"task"`)
	taskID := regexp.MustCompile(`"taskId":"([^"]+)"`).FindStringSubmatch(last)[1]
	var opID string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT id::text FROM oncebox_op`).Scan(&opID))
	require.Equal(t, opID, taskID, "the task is the op")

	body := `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"` + taskID + `"}}`
	req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var got struct {
		Result map[string]any `json:"result"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Equal(t, taskID, got.Result["taskId"])
	require.Equal(t, "working", got.Result["status"], "nothing dispatches in this test: the op is pending")

	ct, st := mcp.NewInMemoryTransports()
	ss, err := e.srv.MCPServer(e.tenant).Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	stdio, err := mcp.NewClient(&mcp.Implementation{Name: "tasks", Version: "1"}, &mcp.ClientOptions{Capabilities: caps}).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = stdio.Close() })
	require.NotContains(t, stdio.InitializeResult().Capabilities.Extensions, mcpserver.ExtensionTasks)
	res := call(t, stdio, "stripe_payment_intent", map[string]any{"amount": 4300, "currency": "usd"}, nil)
	require.Contains(t, text(t, res), "op key", "a tool result, not a task")
}
