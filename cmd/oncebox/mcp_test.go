package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestMCPOverStdio runs `oncebox mcp --tenant acme` as a child process and talks to it
// with the MCP SDK's own client over stdio: the same tool call sent twice is one op.
func TestMCPOverStdio(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := dbtest.Schema(t)
	_, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"=mcp --tenant acme",
		"DATABASE_URL="+dbtest.ConnString(t, pool), "ONCEBOX_LOG_LEVEL=error",
		// A Stripe key enables the Stripe tools; `oncebox mcp` only enqueues.
		"STRIPE_API_KEY=sk_test_x", "STRIPE_API_BASE=http://127.0.0.1:1", "ONCEBOX_MCP_WAIT=100ms")
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	require.Contains(t, names, "stripe_payment_intent")

	meta := mcp.Meta{mcpserver.MetaConversationID: "conv-1", mcpserver.MetaToolCallID: "toolu_1"}
	args := map[string]any{"amount": 1200, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stripe_payment_intent", Arguments: args, Meta: meta})
	require.NoError(t, err)
	second, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stripe_payment_intent", Arguments: args, Meta: meta})
	require.NoError(t, err)
	text := func(r *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	require.NotContains(t, text(first), "already requested earlier")
	require.Contains(t, text(second), "This payment was already requested earlier and was not repeated now")

	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op").Scan(&n))
	require.Equal(t, 1, n, "one op for the same tool call")
}

// TestMCPSaysWhichVariableToSet: `oncebox mcp` without a vendor, or with mail but no
// seal key, exits with one line naming the variable to set.
func TestMCPSaysWhichVariableToSet(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	_, _, err := tenant.NewStore(pool).Create(context.Background(), "acme")
	require.NoError(t, err)
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{env: []string{"STRIPE_API_KEY=", "SENDGRID_API_KEY=", "ONCEBOX_WEBHOOK_TARGETS="}, want: "set STRIPE_API_KEY (payments, refunds), SENDGRID_API_KEY (mail) or ONCEBOX_WEBHOOK_TARGETS"},
		{env: []string{"STRIPE_API_KEY=", "SENDGRID_API_KEY=SG.x", "ONCEBOX_WEBHOOK_TARGETS=", "ONCEBOX_SEAL_KEY="}, want: "sendgrid.mail needs a seal key: set ONCEBOX_SEAL_KEY"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), append(tc.env, childArgsEnv+"=mcp --tenant acme",
			"DATABASE_URL="+dbtest.ConnString(t, pool), "ONCEBOX_LOG_LEVEL=error")...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		require.Error(t, err)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Len(t, lines, 1, string(out))
		require.Contains(t, lines[0], tc.want)
		require.NotContains(t, lines[0], "tools.Builtin")
	}
}

// TestMCPOverStdioOffersTheCatalog: `oncebox mcp --tools-file` with no built-in vendor
// key offers the catalog's tool over stdio, and a call of it records one op.
func TestMCPOverStdioOffersTheCatalog(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := dbtest.Schema(t)
	_, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	path := writeTools(t, crmCatalog("http://127.0.0.1:1", false))

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"=mcp --tenant acme --tools-file "+path,
		"DATABASE_URL="+dbtest.ConnString(t, pool), "ONCEBOX_LOG_LEVEL=error",
		"STRIPE_API_KEY=", "SENDGRID_API_KEY=", "ONCEBOX_WEBHOOK_TARGETS=", "ONCEBOX_MCP_WAIT=100ms")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	require.Equal(t, []string{"crm_create_lead"}, names, "the catalog's tool, and no built-in one without its key")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crm_create_lead", Arguments: map[string]any{"name": "Ada"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op WHERE tool = 'crm.create_lead'").Scan(&n))
	require.Equal(t, 1, n)
}
