package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
)

// FuzzToolCall calls the MCP tools with arbitrary arguments and _meta: the server must
// never panic nor answer an internal error, and every answer is a tool result (a
// refusal says nothing was executed) or a JSON-RPC error. All iterations share one
// session. `go test -fuzz FuzzToolCall ./mcpserver` explores.
func FuzzToolCall(f *testing.F) {
	pool := dbtest.Schema(f)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"crm"}, RefundApprovalAbove: 10000})...)
	require.NoError(f, err)
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg})
	require.NoError(f, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(f, err)
	tenants := tenant.NewStore(pool)
	ten, _, err := tenants.Create(context.Background(), "fuzz")
	require.NoError(f, err)
	srv, err := mcpserver.New(mcpserver.Config{Outbox: ob, Tenants: tenants, Wait: time.Millisecond})
	require.NoError(f, err)
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.MCPServer(ten.ID).Connect(ctx, st, nil)
	require.NoError(f, err)
	f.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(f, err)
	f.Cleanup(func() { _ = cs.Close() })

	toolNames := []string{"stripe_payment_intent", "stripe_refund", "sendgrid_mail", "webhook_post", "nope"}
	seeds := []struct {
		tool             uint8
		args, conv, call string
	}{
		{0, `{"amount": 1000, "currency": "usd"}`, "c1", "t1"},
		{0, `{"amount": 1000, "currency": "usd"}`, "c1", "t1"},
		{0, `{"amount": 1e2, "currency": "usd", "metadata": {"k": "v\u0000"}}`, "", ""},
		{1, `{"payment_intent": "pi_1", "amount": 20000}`, "c\u0000", "t"},
		{2, `{"from": {"email": "a@example.com"}, "to": [{"email": "b@example.com"}], "subject": "s", "text": "\ud800"}`, "", ""},
		{3, `{"target": "crm", "path": "/h", "body": 1e-20000}`, "", ""},
		{3, `{"target": "crm", "path": "/h", "body": {"\u0000": 1e200000}}`, "", ""},
		{3, `{"target": "crm", "path": "/h", "body": ` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, "", ""},
		{3, `null`, "", ""},
		{3, `[1]`, "", ""},
		{4, `{}`, "", ""},
		{3, `{"target": "crm", "path": "/h", "body": "x"}`, strings.Repeat("c", 600), "\xff"},
	}
	for _, s := range seeds {
		f.Add(s.tool, []byte(s.args), s.conv, s.call)
	}
	f.Fuzz(func(t *testing.T, tool uint8, args []byte, conv, call string) {
		if !json.Valid(args) {
			return // the client cannot send it: the request would not be JSON
		}
		meta := mcp.Meta{}
		if conv != "" {
			meta[mcpserver.MetaConversationID] = conv
		}
		if call != "" {
			meta[mcpserver.MetaToolCallID] = call
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: toolNames[int(tool)%len(toolNames)],
			Arguments: json.RawMessage(args), Meta: meta})
		if err != nil {
			require.NotErrorIs(t, err, context.DeadlineExceeded)
			require.NotContains(t, err.Error(), "internal")
			return
		}
		require.NotEmpty(t, res.Content)
		txt, ok := res.Content[0].(*mcp.TextContent)
		require.True(t, ok)
		require.NotContains(t, txt.Text, "internal error", string(args))
	})
}
