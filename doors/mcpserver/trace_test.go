package mcpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// storedTrace returns the trace context stored with the op of the call.
func (e *env) storedTrace(t *testing.T, opID string) string {
	t.Helper()
	var tp *string
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT trace_parent FROM oncebox_op WHERE id = $1", opID).Scan(&tp))
	if tp == nil {
		return ""
	}
	return *tp
}

// TestToolCallKeepsTheAgentsTrace: a call's _meta traceparent, or the traceparent header
// of the /mcp request, is the trace context its op is stored under (oncebox's own
// tracing is off here: the caller's context is kept as it came).
func TestToolCallKeepsTheAgentsTrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const viaMeta = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	v := structured(t, call(t, e.inMemory(t), "stripe_payment_intent", payment(120), mcp.Meta{"traceparent": viaMeta}))
	require.Equal(t, viaMeta, e.storedTrace(t, v.ID))

	ts := httptest.NewServer(e.srv.HTTPHandler())
	t.Cleanup(ts.Close)
	const viaHeader = "00-1bf7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"
	cs := e.connectURL(t, ts.URL, http.Header{"Traceparent": {viaHeader}})
	h := structured(t, call(t, cs, "stripe_payment_intent", payment(130), nil))
	require.Equal(t, viaHeader, e.storedTrace(t, h.ID))
	// _meta wins over the header.
	m := structured(t, call(t, cs, "stripe_payment_intent", payment(140), mcp.Meta{"traceparent": viaMeta}))
	require.Equal(t, viaMeta, e.storedTrace(t, m.ID))
}
