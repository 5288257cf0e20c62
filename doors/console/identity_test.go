package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/mcpserver"
)

// bearer adds an Authorization header to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestLookupShowsIdentityMatches: a payment asked for twice over MCP in other words is
// one op, and its lookup's timeline shows the call matched to it, with the field that
// differed and where the call came from.
func TestLookupShowsIdentityMatches(t *testing.T) {
	t.Parallel()
	e := start(t)
	ctx := context.Background()
	pay := func(description string) mcpserver.OpView {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: e.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{e.agent}}, MaxRetries: -1},
			// 2025-11-25, the last revision with sessions: the timeline names the session.
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		require.NoError(t, err)
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stripe_payment_intent", Arguments: map[string]any{
			"amount": 1999, "currency": "usd", "customer": "cus_ada", "description": description}})
		require.NoError(t, err)
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var v mcpserver.OpView
		require.NoError(t, json.Unmarshal(b, &v))
		return v
	}
	first := pay("Monthly plan for Ada")
	second := pay("Ada's monthly subscription")
	require.Equal(t, first.ID, second.ID)
	require.NotNil(t, second.Matched)

	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	resp, page = b.get("/console/lookup?q=" + first.Key)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "call matched by identity: the same operation in other words, not executed")
	require.Contains(t, page, "differed: description")
	require.Contains(t, page, "conversation session:")
}
