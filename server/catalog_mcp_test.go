package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// TestCatalogToolsInMCP: an SDK client's tools/list shows the catalog tools with
// their schemas, names valid for strict clients and annotations by class; a read tool
// answers at once through MCP and makes no op.
func TestCatalogToolsInMCP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, token, fake, _ := catalogServer(t)
	transport := &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: token}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, transport, nil)
	require.NoError(t, err)
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	byName := map[string]*mcp.Tool{}
	strict := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	for _, tool := range list.Tools {
		require.Regexp(t, strict, tool.Name)
		byName[tool.Name] = tool
	}
	schemaOf := func(tool *mcp.Tool) map[string]any {
		b, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}

	write := byName["helpdesk_create_ticket"]
	require.NotNil(t, write, "tools: %v", byName)
	require.Equal(t, "helpdesk.create_ticket", write.Annotations.Title)
	require.False(t, write.Annotations.ReadOnlyHint)
	require.False(t, *write.Annotations.DestructiveHint)
	require.True(t, write.Annotations.IdempotentHint)
	require.True(t, *write.Annotations.OpenWorldHint)
	props := schemaOf(write)["properties"].(map[string]any)
	require.Equal(t, map[string]any{"type": "string", "maxLength": float64(20)}, props["subject"])
	require.Contains(t, props, "occurrence", "write tools take occurrence like the built-in ones")

	unsafe := byName["helpdesk_close_account"]
	require.NotNil(t, unsafe)
	require.True(t, *unsafe.Annotations.DestructiveHint)
	require.True(t, unsafe.Annotations.IdempotentHint)

	read := byName["helpdesk_find"]
	require.NotNil(t, read)
	require.True(t, read.Annotations.ReadOnlyHint)
	require.False(t, *read.Annotations.DestructiveHint)
	require.False(t, read.Annotations.IdempotentHint)
	require.True(t, *read.Annotations.OpenWorldHint)
	require.Equal(t, []any{"oncebox_op"}, schemaOf(read)["required"])

	// A read tool answers at once: the fake target's lookup, called with no op.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "helpdesk_find", Arguments: map[string]any{"oncebox_op": "op_none"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	require.JSONEq(t, `{"status":200,"body":{"objects":[]}}`, res.Content[0].(*mcp.TextContent).Text)
	require.Zero(t, fake.Requests(), "no POST reached the target")

	// A schema violation names the field and the rule.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "helpdesk_create_ticket", Arguments: map[string]any{"customer_id": "c1"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, `"subject"`)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "required")

	// An argument that fills a path must be one segment: refused at enqueue, naming it.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "helpdesk_create_ticket",
		Arguments: map[string]any{"customer_id": "../../x", "subject": "s"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "customer_id")
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, `must not contain ".."`)
	require.Zero(t, fake.Requests(), "nothing reached the target")
}
