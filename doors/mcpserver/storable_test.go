package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// callRaw calls a tool with raw JSON arguments, as sent on the wire.
func callRaw(t testing.TB, cs *mcp.ClientSession, name, args string) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
}

// TestUnstorableArgsAreRefused: arguments Postgres cannot store are refused as invalid
// by the same check as the HTTP API's, not answered as an internal error.
func TestUnstorableArgsAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := e.inMemory(t)
	for _, body := range []string{
		`1e-20000`,
		`0.` + strings.Repeat("1", 17000),
		`1e200000`,
		`{"a\u0000": 1}`,
		`"\ud800"`,
		strings.Repeat("[", 70) + strings.Repeat("]", 70),
	} {
		res, err := callRaw(t, cs, "webhook_post", `{"target": "crm", "path": "/hook", "body": `+body+`}`)
		if err != nil {
			// The SDK refused it itself, as a JSON-RPC error: no op either.
			continue
		}
		require.True(t, res.IsError, body[:min(len(body), 20)])
		require.NotContains(t, text(t, res), "internal error", body[:min(len(body), 20)])
		require.Contains(t, text(t, res), "Nothing was executed")
	}
	require.Equal(t, 0, e.countOps(t))
}
