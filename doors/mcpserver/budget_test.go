package mcpserver_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
)

// TestModelIsToldWhichBudgetOrPolicy: over MCP, an op a budget sends to approval says
// which budget in its result, and one a refusing budget stops says so and that nothing
// was executed.
func TestModelIsToldWhichBudgetOrPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"crm"}})...)
	require.NoError(t, err)
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg, Budgets: []governance.Budget{
		{Name: "one-refund", Tool: protocol.ToolRefund, Window: governance.Duration(time.Hour), Count: 1},
		{Name: "one-payment", Tool: protocol.ToolPaymentIntent, Window: governance.Duration(time.Hour), Count: 1, OnExceed: governance.ExceedRefuse},
	}})
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(t, err)
	tenants := tenant.NewStore(pool)
	tn, _, err := tenants.Create(ctx, "t")
	require.NoError(t, err)
	// The payments the tests refund were made outside oncebox: the tenant adopts them.
	_, err = tenants.Adopt(context.Background(), "t", "stripe", []string{"pi_1", "pi_2"}, "test")
	require.NoError(t, err)
	srv, err := mcpserver.New(mcpserver.Config{Outbox: ob, Tenants: tenants, Wait: 50 * time.Millisecond})
	require.NoError(t, err)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.MCPServer(tn.ID).Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	refund := func(pi string) *mcp.CallToolResult {
		return call(t, cs, "stripe_refund", map[string]any{"payment_intent": pi, "amount": 100}, nil)
	}
	refund("pi_1")
	waits := text(t, refund("pi_2"))
	require.Contains(t, waits, `budget "one-refund"`, waits)

	pay := func(n int) *mcp.CallToolResult {
		return call(t, cs, "stripe_payment_intent", map[string]any{"amount": 100 + n, "currency": "usd"}, nil)
	}
	pay(1)
	res := pay(2)
	require.True(t, res.IsError)
	require.Contains(t, text(t, res), `budget "one-payment"`)
	require.Contains(t, text(t, res), "Nothing was executed")
}

// TestSessionPerCallDoesNotEscapeAConversationBudget: over MCP, a call that names no
// conversation counts in its token's bucket of ops without one, not per session, so a
// new session per call is refused at the budget's limit (2); a new conversation named
// per call, each in a new session, is capped per token at Conversations (3) times the
// limit, counting the 2 before.
func TestSessionPerCallDoesNotEscapeAConversationBudget(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, nil, governance.Budget{Name: "conv-cap", Tool: protocol.ToolPaymentIntent, Scope: governance.ScopeConversation,
		Window: governance.Duration(time.Hour), Count: 2, Conversations: 3, OnExceed: governance.ExceedRefuse})
	ts := httptest.NewServer(e.srv.HTTPHandler())
	t.Cleanup(ts.Close)
	refused := func(n int, meta mcp.Meta) bool {
		res := call(t, e.connectHTTP(t, ts), "stripe_payment_intent", map[string]any{"amount": 100 + n, "currency": "usd"}, meta)
		if res.IsError {
			require.Contains(t, text(t, res), `budget "conv-cap"`)
		}
		return res.IsError
	}
	var got []bool
	for n := range 3 {
		got = append(got, refused(n, nil))
	}
	require.Equal(t, []bool{false, false, true}, got, "a session per call, no conversation: counted per token")
	got = nil
	for n := range 5 {
		got = append(got, refused(10+n, mcp.Meta{mcpserver.MetaConversationID: fmt.Sprintf("conv-%d", n)}))
	}
	require.Equal(t, []bool{false, false, false, false, true}, got, "a new conversation per call: 3 conversations' worth per token")
	require.Equal(t, 6, e.countOps(t), "the refused calls recorded nothing")
}
