package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/mcpserver"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/fakestripe"
)

// TestRewordedPaymentIsOnePaymentIntent is issue 36's case end to end, in a real server
// with the fake Stripe: two MCP sessions naming no conversation ask for the same payment
// (amount, currency, payment method) with two descriptions. The fake Stripe holds one
// PaymentIntent, the second answer says the payment was already requested, and /metrics
// counts the match; "occurrence": 2 makes a second PaymentIntent.
func TestRewordedPaymentIsOnePaymentIntent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake := fakestripe.New(fakestripe.Config{})
	stripe := httptest.NewServer(fake)
	t.Cleanup(stripe.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_identity", stripe.URL
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + addr.String()
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	pay := func(cs *mcp.ClientSession, description string, occurrence int) (mcpserver.OpView, string) {
		args := map[string]any{"amount": 4200, "currency": "eur", "payment_method": "pm_card_visa", "confirm": true,
			"description": description}
		if occurrence > 0 {
			args["occurrence"] = occurrence
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stripe_payment_intent", Arguments: args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%+v", res.Content)
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var v mcpserver.OpView
		require.NoError(t, json.Unmarshal(b, &v))
		return v, res.Content[0].(*mcp.TextContent).Text
	}

	first, text := pay(mcpSession(t, base, token), "Order 1042 for Ada Lovelace", 0)
	require.Equal(t, "succeeded", first.Status, text)
	second, text := pay(mcpSession(t, base, token), "Ada's order #1042, paid by card", 0)
	require.Equal(t, first.ID, second.ID)
	require.True(t, second.Replayed)
	require.Contains(t, text, "was already requested at")
	require.Contains(t, text, "(description differed), so this call was not executed; that one was carried out (vendor reference "+first.VendorRef+")")
	require.Contains(t, text, `"occurrence": 2`)
	time.Sleep(300 * time.Millisecond) // a second PaymentIntent, had one been sent, would be there by now
	pis := fake.PaymentIntents()
	require.Len(t, pis, 1, "one PaymentIntent: %+v", pis)
	require.Equal(t, "Order 1042 for Ada Lovelace", pis[0].Description, "the first wording stands")

	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Contains(t, string(body), `oncebox_identity_matches_total{tool="stripe.payment_intent"} 1`)

	again, _ := pay(mcpSession(t, base, token), "A second order for Ada", 2)
	require.False(t, again.Replayed)
	require.NotEqual(t, first.ID, again.ID)
	require.Equal(t, "succeeded", again.Status)
	require.Len(t, fake.PaymentIntents(), 2, "occurrence 2 is a deliberate second payment")
	require.False(t, strings.HasPrefix(again.Key, "mcp_"), "a key of the window: %s", again.Key)
}
