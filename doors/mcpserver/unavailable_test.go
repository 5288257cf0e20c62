package mcpserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
)

// TestDatabaseOutageIsAJSONRPCError: a tool call that cannot be recorded because
// Postgres cannot be reached is answered with a JSON-RPC error telling the client to
// retry the same call, not with an "internal error" text.
func TestDatabaseOutageIsAJSONRPCError(t *testing.T) {
	t.Parallel()
	dead, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(dead.Close)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"crm"}})...)
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: dead, Tools: reg})
	require.NoError(t, err)
	refused := 0
	srv, err := mcpserver.New(mcpserver.Config{Outbox: ob, Tenants: tenant.NewStore(dbtest.Schema(t)), Wait: 50 * time.Millisecond,
		OnStoreUnavailable: func() { refused++ }})
	require.NoError(t, err)
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.MCPServer(1).Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "webhook_post", Arguments: map[string]any{"target": "crm", "path": "/x", "body": map[string]any{"a": 1}}})
	require.Nil(t, res)
	var rpcErr *jsonrpc.Error
	require.True(t, errors.As(err, &rpcErr), "%T %v", err, err)
	require.Equal(t, int64(mcpserver.CodeStoreUnavailable), rpcErr.Code)
	require.Contains(t, rpcErr.Message, "retry the same tool call")
	require.Equal(t, 1, refused)
}
