package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

// TestAdmissionReadsHoldNoLocks: the vendor reads a new op's admission needs (the tag
// of an object the tenant's ops do not name, the price of a refund without an amount)
// are made while the enqueue holds no row lock: an enqueue of the same tenant made from
// inside the read, which takes the same key, and is counted against the same budget
// usage row, is not held. The read is made once per call, and its answer is used.
func TestAdmissionReadsHoldNoLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newSchema(t)
	var (
		ob             *outbox.Outbox
		acme           int64
		tags, prices   atomic.Int32
		insideKey      string
		insideTook     time.Duration
		insideErr      error
		insideEnqueues atomic.Int32
	)
	// inside enqueues test.echo under key, as another call of acme's made while the
	// vendor is asked.
	inside := func(ctx context.Context, key string) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, insideErr = ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: acme, Key: key, Tool: "test.echo",
			Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, insideEnqueues.Add(1)))})
		insideTook = time.Since(start)
	}
	act := actTool(func(ctx context.Context, id string) (string, error) {
		tags.Add(1)
		inside(ctx, insideKey)
		return "", nil
	})
	refund := vendorapi.Tool{Name: "test.refund", Vendor: "things", Validate: func(json.RawMessage) error { return nil },
		Amount: func(json.RawMessage) (int64, string, bool) { return 0, "", false },
		Price: func(ctx context.Context, _ json.RawMessage) (int64, string, error) {
			prices.Add(1)
			inside(ctx, fmt.Sprintf("inside-%d", prices.Load()))
			return 500, "usd", nil
		}}
	reg, err := outbox.NewRegistry(echoTool("things"), act, refund)
	require.NoError(t, err)
	gate := newGate(t, pool, reg, nil,
		governance.Budget{Name: "ops", Window: governance.Duration(time.Hour), Count: 100},
		governance.Budget{Name: "refunds", Tool: "test.refund", Window: governance.Duration(time.Hour), Amount: map[string]int64{"*": 1000}})
	ob, err = outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gate})
	require.NoError(t, err)
	acme = optest.Tenant(t, pool, "acme")

	// The tag: the act call's key is free while Stripe is asked (inside takes it, and
	// the act call then finds it taken).
	insideKey = "act-1"
	_, err = ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: acme, Key: "act-1", Tool: "test.act", Args: json.RawMessage(`{"thing":"thing_9"}`)})
	require.NoError(t, insideErr, "the key was held while the vendor was asked")
	require.Less(t, insideTook, 2*time.Second)
	var conflict *outbox.KeyConflictError
	require.ErrorAs(t, err, &conflict, "the call ran again after the read, and found its key taken")
	require.Equal(t, int32(1), tags.Load())

	// The price: no budget usage row is locked while the vendor is asked.
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: acme, Key: "refund-1", Tool: "test.refund", Args: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NoError(t, insideErr, "the budget was locked while the vendor was asked")
	require.Less(t, insideTook, 2*time.Second)
	require.Equal(t, "pending", string(res.Op.Status), "counted at its price, within the budget")
	require.Equal(t, int32(1), prices.Load())
	require.Equal(t, 500, dbtest.Count(t, pool, "SELECT coalesce(sum(amount), 0)::int FROM oncebox_budget_usage WHERE budget = 'refunds'"))
}

// TestAdmissionReadInCallersTransactionIsBounded: in the caller's own transaction
// (EnqueueTx) the read is made there, bounded by Config.AdmissionReadTimeout: a vendor
// that does not answer refuses the call as one that could not be asked, and the
// caller's transaction goes on.
func TestAdmissionReadInCallersTransactionIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newSchema(t)
	reg, err := outbox.NewRegistry(echoTool("things"), actTool(func(ctx context.Context, _ string) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}))
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, AdmissionReadTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	acme := optest.Tenant(t, pool, "acme")
	start := time.Now()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := ob.EnqueueTx(ctx, tx, outbox.EnqueueParams{TenantID: acme, Key: "act-1", Tool: "test.act", Args: json.RawMessage(`{"thing":"thing_9"}`)})
		require.ErrorIs(t, err, outbox.ErrObjectUnavailable)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		_, err = ob.EnqueueTx(ctx, tx, outbox.EnqueueParams{TenantID: acme, Key: "echo-1", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
		return err
	})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 3*time.Second)
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op"), "the echo op, nothing of the refused call")
}
