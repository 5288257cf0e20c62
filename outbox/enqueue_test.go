package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

func TestEnqueueNewThenReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	tenant := optest.Tenant(t, e.pool, "acme")

	first, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "  order-1  ", Tool: "test.echo",
		Args: json.RawMessage(`{"n": 1}`), ConversationID: "conv", ToolCallID: "call"})
	require.NoError(t, err)
	require.False(t, first.Replayed)
	require.Equal(t, "order-1", first.Op.Key, "surrounding white space is trimmed")
	require.Equal(t, protocol.StatusPending, first.Op.Status)
	require.Equal(t, vendorapi.VendorKey(tenant, "order-1", "test.echo", 0), first.Op.VendorKey)

	// Same payload spelled differently: a replay.
	again, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "order-1", Tool: "test.echo",
		Args: json.RawMessage(`{ "n" : 1.0 }`)})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Op.ID, again.Op.ID)
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job"))
}

func TestEnqueueConcurrentSamePayload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	tenant := optest.Tenant(t, e.pool, "acme")

	const n = 50
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ids      = map[string]int{}
		replays  int
		failures []error
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "same", Tool: "test.echo",
				Args: json.RawMessage(`{"n": 7}`)})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, err)
				return
			}
			ids[res.Op.ID]++
			if res.Replayed {
				replays++
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, failures)
	require.Len(t, ids, 1, "every caller gets the same op id")
	require.Equal(t, n-1, replays, "all but one are replays")
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job"))
}

func TestEnqueueConcurrentConflictingPayloads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	tenant := optest.Tenant(t, e.pool, "acme")

	const n = 50
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		winners   []int
		conflicts int
		others    []error
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "race", Tool: "test.echo",
				Args: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))})
			mu.Lock()
			defer mu.Unlock()
			var kc *outbox.KeyConflictError
			switch {
			case err == nil:
				winners = append(winners, i)
			case errors.As(err, &kc) && errors.Is(err, outbox.ErrKeyConflict) && kc.Stored != kc.Given:
				// Checked here, asserted by the test goroutine below: require may not
				// stop a test from another goroutine.
				conflicts++
			default:
				others = append(others, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, others)
	require.Len(t, winners, 1)
	require.Equal(t, n-1, conflicts)

	var stored int
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT (args->>'n')::int FROM oncebox_op WHERE idempotency_key = 'race'").Scan(&stored))
	require.Equal(t, winners[0], stored, "the stored args are the winner's")
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job"))
}

func TestEnqueueTxRollbackLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	tenant := optest.Tenant(t, e.pool, "acme")

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	res, err := e.ob.EnqueueTx(ctx, tx, outbox.EnqueueParams{TenantID: tenant, Key: "k", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	// Inside the caller's transaction the op and its job exist.
	rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, tx, &dispatch.Args{OpID: res.Op.ID, Vendor: "echo"}, nil)
	require.NoError(t, tx.Rollback(ctx))

	rivertest.RequireNotInserted(ctx, t, riverpgxv5.New(e.pool), &dispatch.Args{}, nil)
	require.Equal(t, 0, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))
}

func TestEnqueueTxCommitsWithBusinessRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	tenant := optest.Tenant(t, e.pool, "acme")
	_, err := e.pool.Exec(ctx, "CREATE TABLE orders (id int primary key)")
	require.NoError(t, err)

	err = pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES (1)"); err != nil {
			return err
		}
		_, err := e.ob.EnqueueTx(ctx, tx, outbox.EnqueueParams{TenantID: tenant, Key: "order-1", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM orders"))
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch'"))
}

// TestEnqueueForAnUnknownTenantRecordsNothing: the op's tenant is read, not locked, at
// the insert (migration 027 dropped the foreign key): a tenant that does not exist is
// refused with ErrUnknownTenant, alone or in the caller's transaction, and nothing is
// stored or queued.
func TestEnqueueForAnUnknownTenantRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	tenant := optest.Tenant(t, e.pool, "acme")
	unknown := outbox.EnqueueParams{TenantID: tenant + 1, Key: "k", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)}

	_, err := e.ob.Enqueue(ctx, unknown)
	require.ErrorIs(t, err, outbox.ErrUnknownTenant)
	err = pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		_, err := e.ob.EnqueueTx(ctx, tx, unknown)
		return err
	})
	require.ErrorIs(t, err, outbox.ErrUnknownTenant)
	require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))
	require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job"))

	// The tenant's own call under the same key is a new op.
	known := unknown
	known.TenantID = tenant
	res, err := e.ob.Enqueue(ctx, known)
	require.NoError(t, err)
	require.False(t, res.Replayed)
}

// TestDeletingATenantOrAnOpTakesWhatHangsOnIt: the cascades of the foreign keys
// migration 027 dropped are kept by its triggers. An op deleted (as the purge and a
// refused op do) takes its attempts; a tenant deleted by hand takes its ops and their
// attempts, and leaves another tenant's.
func TestDeletingATenantOrAnOpTakesWhatHangsOnIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	acme, other := optest.Tenant(t, e.pool, "acme"), optest.Tenant(t, e.pool, "other")
	ops := map[string]string{}
	for _, c := range []struct {
		tenant int64
		key    string
	}{{acme, "a1"}, {acme, "a2"}, {other, "o1"}} {
		res, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: c.tenant, Key: c.key, Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
		require.NoError(t, err)
		ops[c.key] = res.Op.ID
		_, err = e.pool.Exec(ctx, `INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at)
			VALUES ($1, 1, gen_random_uuid(), 'k', now()), ($1, 2, gen_random_uuid(), 'k', now())`, res.Op.ID)
		require.NoError(t, err)
	}
	attempts := func(key string) int {
		return dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_attempt WHERE op_id = $1", ops[key])
	}

	_, err := e.pool.Exec(ctx, "DELETE FROM oncebox_op WHERE id = $1", ops["a1"])
	require.NoError(t, err)
	require.Zero(t, attempts("a1"))
	require.Equal(t, 2, attempts("a2"))

	_, err = e.pool.Exec(ctx, "DELETE FROM oncebox_tenant WHERE id = $1", acme)
	require.NoError(t, err)
	require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op WHERE tenant_id = $1", acme))
	require.Zero(t, attempts("a2"))
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op WHERE tenant_id = $1", other))
	require.Equal(t, 2, attempts("o1"))
}

func TestEnqueueTenantsAreIndependent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	a := optest.Tenant(t, e.pool, "a")
	b := optest.Tenant(t, e.pool, "b")

	ra, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: a, Key: "shared", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	rb, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: b, Key: "shared", Tool: "test.echo", Args: json.RawMessage(`{"n":2}`)})
	require.NoError(t, err, "another tenant's payload under the same key is not a conflict")
	require.False(t, rb.Replayed)
	require.NotEqual(t, ra.Op.ID, rb.Op.ID)
	require.NotEqual(t, ra.Op.VendorKey, rb.Op.VendorKey, "vendor keys differ per tenant")

	// Each tenant's replay is its own op.
	for _, want := range []*outbox.EnqueueResult{ra, rb} {
		again, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: want.Op.TenantID, Key: "shared", Tool: "test.echo", Args: want.Op.Args})
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, want.Op.ID, again.Op.ID, "a replay answers with the tenant's own op")
	}
}

// TestHistoryIsScopedToTheTenant: another tenant's op id yields no attempts and no
// events.
func TestHistoryIsScopedToTheTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	a := optest.Tenant(t, e.pool, "a")
	b := optest.Tenant(t, e.pool, "b")
	ra, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: a, Key: "k", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at)
		SELECT id, 1, gen_random_uuid(), vendor_key, now() FROM oncebox_op WHERE id = $1`, ra.Op.ID)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO oncebox_op_event (op_id, kind, actor, detail) VALUES ($1, 'note', 'test', '{}')`, ra.Op.ID)
	require.NoError(t, err)

	other, err := e.ob.History(ctx, b, ra.Op.ID)
	require.NoError(t, err)
	require.Empty(t, other.Attempts, "another tenant's attempts")
	require.Empty(t, other.Events, "another tenant's events")
	own, err := e.ob.History(ctx, a, ra.Op.ID)
	require.NoError(t, err)
	require.Len(t, own.Attempts, 1)
	require.Len(t, own.Events, 1)
}

func TestEnqueueRefusesBadInputAndStoresNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	tenant := optest.Tenant(t, e.pool, "acme")

	cases := []struct {
		name   string
		params outbox.EnqueueParams
		is     error
		text   string
	}{
		{"empty key", outbox.EnqueueParams{Key: "   ", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)}, protocol.ErrInvalidKey, "is empty"},
		{"long key", outbox.EnqueueParams{Key: string(make([]byte, 256)), Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)}, protocol.ErrInvalidKey, ""},
		{"unknown tool", outbox.EnqueueParams{Key: "k", Tool: "nope", Args: json.RawMessage(`{"n":1}`)}, outbox.ErrUnknownTool, `unknown tool "nope"`},
		{"invalid args", outbox.EnqueueParams{Key: "k", Tool: "test.echo", Args: json.RawMessage(`{"n":-1}`)}, vendorapi.ErrInvalidArgs, "args.n: must be an integer"},
		{"not json", outbox.EnqueueParams{Key: "k", Tool: "test.echo", Args: json.RawMessage(`{"n":`)}, vendorapi.ErrInvalidArgs, "args: is not valid JSON"},
	}
	for _, tc := range cases {
		tc.params.TenantID = tenant
		_, err := e.ob.Enqueue(ctx, tc.params)
		require.ErrorIs(t, err, tc.is, tc.name)
		require.Contains(t, err.Error(), tc.text, tc.name)
	}
	require.Equal(t, 0, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))
	require.Equal(t, 0, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job"))
}

func TestEnqueueRefusesWhatPostgresCannotStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	tenant := optest.Tenant(t, e.pool, "acme")
	for _, p := range []outbox.EnqueueParams{
		{Key: "k", Tool: "test.echo", Args: json.RawMessage(`{"n":1,"x":"a\u0000b"}`)},
		{Key: "k", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`), ConversationID: "a\x00b"},
		{Key: "k", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`), ToolCallID: string(make([]byte, 513))},
	} {
		p.TenantID = tenant
		_, err := e.ob.Enqueue(ctx, p)
		require.ErrorIs(t, err, vendorapi.ErrInvalidArgs)
	}
}

// TestApproveIsScopedToTheTenant: two tenants hold an op awaiting approval under the
// same key; each tenant's approval releases its own op and never the other's.
func TestApproveIsScopedToTheTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newSchema(t)
	tool := echoTool("echo")
	tool.NeedsApproval = func(json.RawMessage) bool { return true }
	reg, err := outbox.NewRegistry(tool)
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: newGate(t, pool, reg, nil)})
	require.NoError(t, err)
	a := optest.Tenant(t, pool, "a")
	b := optest.Tenant(t, pool, "b")
	// B's op is stored first, so a lookup that forgot the tenant finds it first.
	rb, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: b, Key: "shared", Tool: "test.echo", Args: json.RawMessage(`{"n":2}`)})
	require.NoError(t, err)
	ra, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: a, Key: "shared", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, rb.Op.Status)

	got, err := ob.Approve(ctx, a, "shared", "ada", "mine")
	require.NoError(t, err)
	require.Equal(t, ra.Op.ID, got.ID)
	require.Equal(t, protocol.StatusPending, got.Status)
	opB, err := ob.Get(ctx, b, "shared")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, opB.Status, "A's approval released B's op")
	opA, err := ob.Get(ctx, a, "shared")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusPending, opA.Status, "A's approval did not release A's op")

	// And the other way round: whichever row a lookup that forgot the tenant found
	// first, one of the two approvals would have reached the wrong op.
	got, err = ob.Approve(ctx, b, "shared", "bob", "mine too")
	require.NoError(t, err, "B's approval must find B's op awaiting approval")
	require.Equal(t, rb.Op.ID, got.ID)
	require.Equal(t, protocol.StatusPending, got.Status)
}
