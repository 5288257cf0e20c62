package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/tenant"
)

// TestMCPServesTheLatestRevision (issue 45, item 2): the Go SDK's client, which offers
// 2026-07-28 and asks server/discover first, ends up on 2026-07-28 (stateless, no
// initialize), not on 2025-11-25; three calls of one payment from three such
// connections, the second and third re-issued as after a dropped stream, make one
// PaymentIntent. A session client (2025-11-25) is still served beside it.
func TestMCPServesTheLatestRevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := fakestripe.New(fakestripe.Config{})
	stripe := httptest.NewServer(fake)
	t.Cleanup(stripe.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_latest", stripe.URL
	_, base := runServer(t, ctx, cfg)
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	connect := func() *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token: token}}, MaxRetries: -1}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	for range 3 {
		cs := connect()
		require.Equal(t, "2026-07-28", cs.InitializeResult().ProtocolVersion)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stripe_payment_intent",
			Arguments: map[string]any{"amount": 1500, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}})
		require.NoError(t, err)
		require.False(t, res.IsError, "%+v", res.Content)
	}
	require.Len(t, fake.PaymentIntents(), 1, "a call re-issued on a new connection is the same op")

	status, _ := postMCP(t, base, token)
	require.Equal(t, http.StatusOK, status, "a 2025-06-18 initialize is still served")
}
