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

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/tenant"
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
	_, base := runServer(t, ctx, cfg)
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

	// The op's history over HTTP names the match.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/ops/"+first.Key+"?history=true", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var op struct {
		History struct {
			IdentityMatches []struct {
				Differed []string `json:"differed"`
			} `json:"identity_matches"`
		} `json:"history"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&op))
	_ = resp.Body.Close()
	require.Len(t, op.History.IdentityMatches, 1)
	require.Equal(t, []string{"description"}, op.History.IdentityMatches[0].Differed)

	resp, err = http.Get(base + "/metrics")
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

// TestCatalogToolIdentity: a catalog tool whose identity is its customer and order
// reference: the same ticket asked for from two MCP sessions with its subject reworded
// is one ticket at the target; another order is another ticket. An upstream tool's
// identity works the same way: one mail at the fake upstream for a reworded subject.
func TestCatalogToolIdentity(t *testing.T) {
	t.Parallel()
	hook := fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(hook)
	t.Cleanup(target.Close)
	fake := fakemcp.New()
	base, token, _, pool := upstreamOnceboxLogged(t, fake, func(url string) string {
		return `
targets:
  helpdesk:
    base_url: ` + target.URL + `
tools:
  helpdesk.create_ticket:
    description: Open a support ticket for a customer's order.
    class: write
    target: helpdesk
    path: /tickets
    identity: [customer_id, order_ref]
    input_schema:
      type: object
      properties: {customer_id: {type: string}, order_ref: {type: string}, subject: {type: string}}
      required: [customer_id, order_ref, subject]
upstreams:
  mail:
    url: ` + url + `
    tools:
      send_mail: {identity: [to]}
`
	}, nil, nil)
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		res, err := mcpSession(t, base, token).CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%+v", res.Content)
		return res
	}
	ticket := func(order, subject string) map[string]any {
		return map[string]any{"customer_id": "cus_ada", "order_ref": order, "subject": subject}
	}
	call("helpdesk_create_ticket", ticket("o-77", "Parcel never arrived"))
	res := call("helpdesk_create_ticket", ticket("o-77", "Order o-77: the parcel has not arrived"))
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "(subject differed), so this call was not executed")
	call("helpdesk_create_ticket", ticket("o-78", "Parcel never arrived"))
	var n int
	require.Eventually(t, func() bool {
		err := pool.QueryRow(context.Background(), "SELECT count(*) FROM oncebox_op WHERE tool = 'helpdesk.create_ticket' AND status = 'succeeded'").Scan(&n)
		return err == nil && n == 2
	}, time.Minute, 100*time.Millisecond, "two ticket ops succeed (%d)", n)
	require.Len(t, hook.Effects(), 2, "one ticket per order")

	call("mail_send_mail", map[string]any{"to": "ann@example.com", "subject": "Your refund"})
	call("mail_send_mail", map[string]any{"to": "ann@example.com", "subject": "About your refund"})
	waitStatus(t, pool, "mail.send_mail", "succeeded")
	require.Len(t, fake.Mails(), 1, "one mail at the upstream for a reworded subject")
}
