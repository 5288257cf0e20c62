package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// bearerTransport adds an Authorization header to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPOnePaymentAcrossSessionsAndRestarts is what an agent framework does to
// oncebox: a real `oncebox serve` with a fake Stripe; the same payment asked for in two
// MCP sessions over HTTP, then twice more through `oncebox mcp` over stdio, restarted
// in between. With and without _meta, the fake Stripe holds one PaymentIntent per
// payment.
func TestMCPOnePaymentAcrossSessionsAndRestarts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool := dbtest.Schema(t)
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	fake := fakestripe.New(fakestripe.Config{})
	stripeSrv := httptest.NewServer(fake)
	t.Cleanup(stripeSrv.Close)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool), "ONCEBOX_LOG_LEVEL=error",
		"STRIPE_API_KEY=sk_test_oncebox", "STRIPE_API_BASE=" + stripeSrv.URL, "SENDGRID_API_KEY=", "ONCEBOX_WEBHOOK_TARGETS=",
		"ONCEBOX_MCP_WAIT=5s"}
	startChild(t, "serve", append(env, "ONCEBOX_ADDR="+addr)...)
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "oncebox serve did not answer /healthz")

	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	overHTTP := func() *mcp.ClientSession {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
			HTTPClient: &http.Client{Transport: bearerTransport{token: token}}, MaxRetries: -1}, nil)
		require.NoError(t, err)
		return cs
	}
	overStdio := func() *mcp.ClientSession {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), append(env, childArgsEnv+"=mcp --tenant acme")...)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		require.NoError(t, err)
		return cs
	}
	pay := func(cs *mcp.ClientSession, amount int, meta mcp.Meta) mcpserver.OpView {
		defer func() { _ = cs.Close() }()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stripe_payment_intent", Meta: meta, Arguments: map[string]any{
			"amount": amount, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true, "description": "order 77"}})
		require.NoError(t, err)
		require.False(t, res.IsError)
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var v mcpserver.OpView
		require.NoError(t, json.Unmarshal(b, &v))
		return v
	}

	for _, tc := range []struct {
		name   string
		amount int
		meta   mcp.Meta
	}{
		{name: "without _meta", amount: 1500},
		{name: "with _meta", amount: 1600, meta: mcp.Meta{mcpserver.MetaConversationID: "conv-77"}},
	} {
		first := pay(overHTTP(), tc.amount, tc.meta)
		require.False(t, first.Replayed, tc.name)
		for i, cs := range []*mcp.ClientSession{overHTTP(), overStdio(), overStdio()} {
			v := pay(cs, tc.amount, tc.meta)
			require.True(t, v.Replayed, "%s: call %d is a replay", tc.name, i+2)
			require.Equal(t, first.ID, v.ID, tc.name)
		}
		require.Eventually(t, func() bool {
			pis, _ := fake.ByTag("oncebox_op", first.ID)
			return len(pis) == 1
		}, time.Minute, 50*time.Millisecond, "%s: the payment reaches the fake Stripe", tc.name)
	}
	// A second PaymentIntent, had one been sent, would have been sent by now: the
	// replays above each waited for the op to be settled.
	require.Len(t, fake.PaymentIntents(), 2, fmt.Sprintf("one PaymentIntent per payment: %+v", fake.PaymentIntents()))
}
