package server_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
)

// TestUpstreamEverythingServer runs oncebox in front of an MCP server nobody here
// wrote: the protocol's reference "everything" server from npm
// (@modelcontextprotocol/server-everything, over stdio). `make mcp-everything`
// installs it and sets ONCEBOX_EVERYTHING_BIN; without it the test is skipped.
// Its tools are offered with their schemas and classified by their annotations; a
// read tool is forwarded; echo, read-only upstream but write in the file, is an op
// whose CallToolResult comes back through MCP, and again on a repeat.
func TestUpstreamEverythingServer(t *testing.T) {
	bin := os.Getenv("ONCEBOX_EVERYTHING_BIN")
	if bin == "" {
		t.Skip("ONCEBOX_EVERYTHING_BIN is not set (make mcp-everything)")
	}
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.WebhookTimeout = 20 * time.Second
	cfg.ToolsFile = writeCatalog(t, `
upstreams:
  everything:
    command: `+bin+`
    args: [stdio]
    tools:
      echo: {class: write, dedupe_window: 1h}
`)
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	cs := mcpSession(t, "http://"+addr.String(), token)

	list, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	byName := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		byName[tool.Name] = tool
	}
	sum := byName["everything_get-sum"]
	require.NotNil(t, sum, "tools: %v", byName)
	require.True(t, sum.Annotations.ReadOnlyHint, "readOnlyHint upstream: read")
	schema, _ := json.Marshal(sum.InputSchema)
	require.Contains(t, string(schema), `"a"`, "the upstream's schema")
	require.False(t, byName["everything_echo"].Annotations.ReadOnlyHint, "the file wins")
	require.False(t, byName["everything_toggle-simulated-logging"].Annotations.ReadOnlyHint, "no readOnlyHint: write")

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything_get-sum", Arguments: map[string]any{"a": 2, "b": 3}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "5")

	echo := func() *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything_echo", Arguments: map[string]any{"message": "once"}})
		require.NoError(t, err)
		return res
	}
	echo()
	waitStatus(t, pool, "everything.echo", "succeeded")
	res = echo()
	require.False(t, res.IsError, "%+v", res.Content)
	require.True(t, strings.Contains(res.Content[0].(*mcp.TextContent).Text, "once"), "%+v", res.Content)
	require.Equal(t, true, res.Meta["oncebox/replayed"])
	var ops int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op").Scan(&ops))
	require.Equal(t, 1, ops, "one op: the read made none, the repeat was the same op")
}
