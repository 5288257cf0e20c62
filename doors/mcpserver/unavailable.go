package mcpserver

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/oncebox/oncebox/doors/pgavail"
)

// CodeStoreUnavailable is the JSON-RPC error code of a tool call that could not be
// recorded because Postgres could not be reached (in the server-error range, clear of
// the codes the SDK and MCP use).
const CodeStoreUnavailable = -32010

// storeUnavailable is the JSON-RPC error a tool call answers while Postgres cannot be
// reached: the client retries the same call, which maps to the same op.
func (s *Server) storeUnavailable(ctx context.Context, log *slog.Logger, err error) error {
	if s.cfg.OnStoreUnavailable != nil {
		s.cfg.OnStoreUnavailable()
	}
	log.LogAttrs(ctx, slog.LevelWarn, "mcp tool call failed: the database is unavailable", slog.Any("error", err))
	return &jsonrpc.Error{Code: CodeStoreUnavailable, Message: "oncebox's database is unavailable: retry the same tool call with the same arguments " +
		"in a few seconds. The call may have been recorded before the failure; retrying it never runs it twice."}
}

// authOutcomeKey is the context key of the *atomic.Bool verifyToken sets when the
// token could not be checked because Postgres could not be reached.
type authOutcomeKey struct{}

// noteUnavailable records, for challenger, that authentication failed for want of
// Postgres.
func noteUnavailable(ctx context.Context, err error) {
	if flag, ok := ctx.Value(authOutcomeKey{}).(*atomic.Bool); ok && pgavail.Unavailable(err) {
		flag.Store(true)
	}
}

// withAuthOutcome gives r the flag noteUnavailable sets.
func withAuthOutcome(r *http.Request) (*http.Request, *atomic.Bool) {
	flag := &atomic.Bool{}
	return r.WithContext(context.WithValue(r.Context(), authOutcomeKey{}, flag)), flag
}
