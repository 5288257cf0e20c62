package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

// approvalTool is echoTool waiting for approval, with a Redact that is deliberately
// not idempotent (it wraps the args once more on every call) and counts its calls.
func approvalTool(calls *int) vendorapi.Tool {
	t := echoTool("echo")
	t.NeedsApproval = func(json.RawMessage) bool { return true }
	t.Redact = func(args json.RawMessage) json.RawMessage {
		*calls++
		return json.RawMessage(`{"redacted":` + string(args) + `}`)
	}
	return t
}

func newApprovalOutbox(t *testing.T, calls *int, sealKey []byte) (env, int64) {
	t.Helper()
	pool := newSchema(t)
	reg, err := outbox.NewRegistry(approvalTool(calls))
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, SealKey: sealKey, Gate: newGate(t, pool, reg, nil)})
	require.NoError(t, err)
	return env{pool: pool, ob: ob}, optest.Tenant(t, pool, "acme")
}

func storedArgs(t *testing.T, e env, id string) (string, bool) {
	t.Helper()
	var (
		args   string
		sealed bool
	)
	require.NoError(t, e.pool.QueryRow(context.Background(),
		"SELECT args::text, sealed_args IS NOT NULL FROM oncebox_op WHERE id = $1", id).Scan(&args, &sealed))
	return args, sealed
}

// TestRejectDropsSealedArgs: a rejected op is terminal: the sealed copy of its full
// args is dropped and its stored args, redacted already, are kept as they are. An
// approved op keeps its sealed args: the worker needs them.
func TestRejectDropsSealedArgs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := 0
	key := make([]byte, seal.KeySize)
	e, tenant := newApprovalOutbox(t, &calls, key)

	enqueue := func(k string) *outbox.Op {
		res, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: k, Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
		require.NoError(t, err)
		require.Equal(t, protocol.StatusAwaitingApproval, res.Op.Status)
		return res.Op
	}
	rejected, approved := enqueue("rej"), enqueue("ok")
	require.Equal(t, 2, calls)

	op, err := e.ob.Reject(ctx, tenant, "rej", "ada", "too much")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusRejected, op.Status)
	args, sealed := storedArgs(t, e, rejected.ID)
	require.False(t, sealed, "a rejected op keeps no sealed args")
	require.JSONEq(t, `{"redacted":{"n":1}}`, args)
	require.Equal(t, 2, calls, "Redact is not called on args that are already redacted")

	_, err = e.ob.Approve(ctx, tenant, "ok", "ada", "fine")
	require.NoError(t, err)
	_, sealed = storedArgs(t, e, approved.ID)
	require.True(t, sealed, "an approved op keeps its sealed args for the worker")
}

// TestRejectRedactsArgsStoredInFull: without a seal key the full args are stored, and
// rejecting the op (terminal) redacts them as the worker would.
func TestRejectRedactsArgsStoredInFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := 0
	e, tenant := newApprovalOutbox(t, &calls, nil)
	res, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "rej", Tool: "test.echo", Args: json.RawMessage(`{"n":2}`)})
	require.NoError(t, err)
	args, sealed := storedArgs(t, e, res.Op.ID)
	require.False(t, sealed)
	require.JSONEq(t, `{"n":2}`, args)

	op, err := e.ob.Reject(ctx, tenant, "rej", "ada", "no")
	require.NoError(t, err)
	require.JSONEq(t, `{"redacted":{"n":2}}`, string(op.Args))
	args, _ = storedArgs(t, e, res.Op.ID)
	require.JSONEq(t, `{"redacted":{"n":2}}`, args)
	require.Equal(t, 1, calls)
}
