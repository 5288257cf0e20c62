package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

// errRefusedForTest is refusalGate's refusal.
var errRefusedForTest = errors.New("refused by the test's gate")

// refusalGate refuses the op whose args are {"n": 13}, fails the transaction of the one
// whose args are {"n": 666} with a statement that errs, and panics on {"n": 777}; it
// admits the others.
type refusalGate struct{}

func (refusalGate) Admit(ctx context.Context, tx pgx.Tx, op outbox.GateOp) (outbox.Admission, error) {
	var a struct{ N int }
	_ = json.Unmarshal(op.Args, &a)
	switch a.N {
	case 13:
		return outbox.Admission{}, errRefusedForTest
	case 666:
		_, err := tx.Exec(ctx, "SELECT 1 / 0")
		return outbox.Admission{}, err
	case 777:
		panic("the test's gate panics")
	}
	return outbox.Admission{}, nil
}

func (refusalGate) CheckApproval(context.Context, pgx.Tx, *outbox.Op, vendorapi.Tool, string) error {
	return nil
}

// groupEnv is an insert-only Outbox with group commit (one committer, so that the
// calls that arrive while a group is held wait for the next one) and refusalGate.
type groupEnv struct {
	pool   *pgxpool.Pool
	ob     *outbox.Outbox
	tenant int64
	// held receives once per group that reached its COMMIT; release lets it commit.
	held, release chan struct{}
}

func newGroupEnv(t *testing.T) *groupEnv {
	t.Helper()
	pool := newSchema(t)
	reg, err := outbox.NewRegistry(echoTool("echo"))
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: refusalGate{},
		GroupCommit: outbox.GroupCommit{MaxOps: 16, Committers: 1}})
	require.NoError(t, err)
	e := &groupEnv{pool: pool, ob: ob, tenant: optest.Tenant(t, pool, "acme"), held: make(chan struct{}), release: make(chan struct{})}
	// A test that ends early lets its held groups go, before its schema is dropped.
	over := make(chan struct{})
	t.Cleanup(func() { close(over) })
	ob.HoldGroupCommitsForTest(func() {
		select {
		case e.held <- struct{}{}:
		case <-over:
			return
		}
		select {
		case <-e.release:
		case <-over:
		}
	})
	return e
}

type answer struct {
	key string
	res *outbox.EnqueueResult
	err error
}

// call enqueues test.echo {"n": n} under key in the background; its answer comes on the
// returned channel.
func (e *groupEnv) call(key string, n int) <-chan answer {
	return e.enqueue(outbox.EnqueueParams{TenantID: e.tenant, Key: key, Tool: "test.echo",
		Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
}

// enqueue enqueues params in the background; its answer comes on the returned channel.
func (e *groupEnv) enqueue(params outbox.EnqueueParams) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		res, err := e.ob.Enqueue(context.Background(), params)
		ch <- answer{key: params.Key, res: res, err: err}
	}()
	return ch
}

// holdFirst opens a group with one call and holds it at its COMMIT, then makes the calls
// in calls (key -> n), which wait for the next group; it returns the first call's answer
// and the others'.
func (e *groupEnv) holdFirst(t *testing.T, calls map[string]int) (<-chan answer, map[string]<-chan answer) {
	t.Helper()
	first := e.call("first", 1)
	<-e.held
	others := map[string]<-chan answer{}
	for key, n := range calls {
		others[key] = e.call(key, n)
	}
	require.Eventually(t, func() bool { return e.ob.GroupWaitingForTest() == len(calls) }, 10*time.Second, time.Millisecond)
	return first, others
}

// commitEach makes the calls in calls (key -> n) one at a time, each in a group of its
// own, and waits for each to commit.
func (e *groupEnv) commitEach(t *testing.T, calls map[string]int) {
	t.Helper()
	for key, n := range calls {
		c := e.call(key, n)
		<-e.held
		e.release <- struct{}{}
		require.NoError(t, (<-c).err, key)
	}
}

// letGo lets every group held from now on commit at once, until e.held is closed.
func (e *groupEnv) letGo() {
	held := e.held
	go func() {
		for range held {
			e.release <- struct{}{}
		}
	}()
}

// collect waits for the calls' answers.
func collect(calls map[string]<-chan answer) map[string]answer {
	answers := map[string]answer{}
	for key, c := range calls {
		answers[key] = <-c
	}
	return answers
}

// noAnswerYet fails if one of the calls has been answered.
func noAnswerYet(t *testing.T, calls ...<-chan answer) {
	t.Helper()
	time.Sleep(100 * time.Millisecond)
	for _, c := range calls {
		select {
		case a := <-c:
			t.Fatalf("call %s was answered (%v, %v) before its group committed", a.key, a.res, a.err)
		default:
		}
	}
}

// TestGroupCommitAnswersOnlyAfterItsCommit holds a group at its COMMIT: none of its
// calls is answered, and none of its ops can be seen, until it commits; then every one
// is, and the group's ops are one transaction's.
func TestGroupCommitAnswersOnlyAfterItsCommit(t *testing.T) {
	t.Parallel()
	e := newGroupEnv(t)
	calls := map[string]int{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
	first, others := e.holdFirst(t, calls)
	noAnswerYet(t, first)
	require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"), "an open group's op is visible")

	e.release <- struct{}{}
	a := <-first
	require.NoError(t, a.err)
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op WHERE idempotency_key = 'first'"))

	// The five waiting calls are the next group, held in turn.
	<-e.held
	var chans []<-chan answer
	for _, c := range others {
		chans = append(chans, c)
	}
	noAnswerYet(t, chans...)
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"), "an open group's op is visible")
	e.release <- struct{}{}
	for key, a := range collect(others) {
		require.NoError(t, a.err, key)
		require.False(t, a.res.Replayed)
		require.Equal(t, key, a.res.Op.Key)
	}
	require.Equal(t, 6, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))
	requireOneJobPerOp(t, e.pool, 6)
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(DISTINCT xmin::text) FROM oncebox_op WHERE idempotency_key <> 'first'"),
		"the group's ops were committed by one transaction")
	require.Equal(t, 1, dbtest.Count(t, e.pool, `SELECT count(DISTINCT j.xmin::text) FROM river_job j
		JOIN oncebox_op o ON j.args->>'op_id' = o.id::text AND j.xmin::text = o.xmin::text WHERE o.idempotency_key <> 'first'`),
		"the group's jobs were committed with its ops")
}

// requireOneJobPerOp checks that each of the want ops has exactly one dispatch job, and
// that there is no other.
func requireOneJobPerOp(t *testing.T, pool *pgxpool.Pool, want int) {
	t.Helper()
	require.Equal(t, want, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op"))
	require.Equal(t, want, dbtest.Count(t, pool, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch'"))
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM oncebox_op o
		WHERE (SELECT count(*) FROM river_job j WHERE j.args->>'op_id' = o.id::text) <> 1`), "an op without its one job")
}

// TestGroupCommitSameKeyTwiceInOneGroup: two calls with one key and one payload in the
// same group are one op with one job; the second is answered as the replay it is.
func TestGroupCommitSameKeyTwiceInOneGroup(t *testing.T) {
	t.Parallel()
	e := newGroupEnv(t)
	first, others := e.holdFirst(t, map[string]int{"x": 1})
	again := e.call("x", 1)
	require.Eventually(t, func() bool { return e.ob.GroupWaitingForTest() == 2 }, 10*time.Second, time.Millisecond)
	e.release <- struct{}{}
	require.NoError(t, (<-first).err)
	<-e.held
	e.release <- struct{}{}
	a, b := <-others["x"], <-again
	require.NoError(t, a.err)
	require.NoError(t, b.err)
	require.Equal(t, a.res.Op.ID, b.res.Op.ID)
	require.NotEqual(t, a.res.Replayed, b.res.Replayed, "one of the two is the replay")
	requireOneJobPerOp(t, e.pool, 2)
}

// TestGroupCommitRefusalsLeaveTheOthers puts a key conflict, a gate's refusal and a
// replay in one group with new calls: the refused calls get their errors and record
// nothing, the others commit together.
func TestGroupCommitRefusalsLeaveTheOthers(t *testing.T) {
	t.Parallel()
	e := newGroupEnv(t)
	e.commitEach(t, map[string]int{"taken": 1, "again": 2})

	calls := map[string]int{"taken": 99, "again": 2, "unlucky": 13, "x": 1, "y": 2}
	first, others := e.holdFirst(t, calls)
	e.release <- struct{}{}
	require.NoError(t, (<-first).err)
	<-e.held
	e.release <- struct{}{}
	answers := collect(others)
	require.ErrorIs(t, answers["taken"].err, outbox.ErrKeyConflict)
	require.ErrorIs(t, answers["unlucky"].err, errRefusedForTest)
	require.NoError(t, answers["again"].err)
	require.True(t, answers["again"].res.Replayed)
	for _, key := range []string{"x", "y"} {
		require.NoError(t, answers[key].err, key)
		require.False(t, answers[key].res.Replayed)
	}
	require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op WHERE idempotency_key = 'unlucky'"))
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op WHERE idempotency_key = 'taken' AND args->>'n' = '1'"))
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(DISTINCT xmin::text) FROM oncebox_op WHERE idempotency_key IN ('x', 'y')"),
		"the refusals did not split the group")
}

// TestGroupCommitFailedTransactionRunsEachCallAlone puts a call whose gate fails the
// transaction (not a refusal: a statement errs) in a group: the group is rolled back and
// each call runs again in a transaction of its own, so only that call fails. With
// replays, the group has no job to insert after the failed call, and its replays must
// still be answered, not failed with the group's lost transaction.
func TestGroupCommitFailedTransactionRunsEachCallAlone(t *testing.T) {
	t.Parallel()
	for _, replays := range []bool{false, true} {
		t.Run(fmt.Sprintf("replays=%t", replays), func(t *testing.T) {
			t.Parallel()
			e := newGroupEnv(t)
			if replays {
				e.commitEach(t, map[string]int{"a": 1, "c": 2})
			}
			// A group runs its calls in key order: "a" is done when "b" fails.
			first, others := e.holdFirst(t, map[string]int{"a": 1, "b": 666, "c": 2})
			e.release <- struct{}{}
			require.NoError(t, (<-first).err)
			// The group fails before its COMMIT and runs each call alone, so it is never
			// held; a group that went on to its COMMIT would be let go.
			e.letGo()
			defer close(e.held)
			answers := collect(others)
			require.ErrorContains(t, answers["b"].err, "division by zero")
			for _, key := range []string{"a", "c"} {
				require.NoError(t, answers[key].err, key)
				require.Equal(t, replays, answers[key].res.Replayed, key)
			}
			require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op WHERE idempotency_key = 'b'"))
			requireOneJobPerOp(t, e.pool, 3)
		})
	}
}

// TestGroupCommitUnknownTenantFailsOnlyItsCall: a call for a tenant that does not
// exist fails the group's insert; the group runs each call alone, and only that call
// is refused.
func TestGroupCommitUnknownTenantFailsOnlyItsCall(t *testing.T) {
	t.Parallel()
	e := newGroupEnv(t)
	first := e.call("first", 1)
	<-e.held
	others := map[string]<-chan answer{"a": e.call("a", 1), "b": e.call("b", 2),
		"nobody": e.enqueue(outbox.EnqueueParams{TenantID: e.tenant + 1, Key: "nobody", Tool: "test.echo", Args: json.RawMessage(`{"n":3}`)})}
	require.Eventually(t, func() bool { return e.ob.GroupWaitingForTest() == len(others) }, 10*time.Second, time.Millisecond)
	e.release <- struct{}{}
	require.NoError(t, (<-first).err)
	e.letGo()
	defer close(e.held)
	answers := collect(others)
	require.ErrorIs(t, answers["nobody"].err, outbox.ErrUnknownTenant)
	for _, key := range []string{"a", "b"} {
		require.NoError(t, answers[key].err, key)
	}
	require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op WHERE idempotency_key = 'nobody'"))
	requireOneJobPerOp(t, e.pool, 3)
}

// TestGroupCommitStoresWhatAnEnqueueAloneStores: the ops a group inserts together (one
// statement) are the rows the same calls store one at a time, the tenant's vendor
// account, a purged key's next generation and the calls' conversation fields included.
func TestGroupCommitStoresWhatAnEnqueueAloneStores(t *testing.T) {
	t.Parallel()
	e := newGroupEnv(t)
	ctx := context.Background()
	reg, err := outbox.NewRegistry(echoTool("echo"))
	require.NoError(t, err)
	alone, err := outbox.New(outbox.Config{Pool: e.pool, Tools: reg, Gate: refusalGate{}})
	require.NoError(t, err)
	other := optest.Tenant(t, e.pool, "alone")
	for _, tenant := range []int64{e.tenant, other} {
		_, err := e.pool.Exec(ctx, `INSERT INTO oncebox_tenant_vendor (tenant_id, vendor, account, updated_by) VALUES ($1, 'echo', 'acct_7', 'test')`, tenant)
		require.NoError(t, err)
		_, err = e.pool.Exec(ctx, `INSERT INTO oncebox_tombstone (tenant_id, idempotency_key, fingerprint, purge_after, generation)
			VALUES ($1, 'purged', '\x00', now() + interval '1 day', 4)`, tenant)
		require.NoError(t, err)
	}
	calls := func(tenant int64) []outbox.EnqueueParams {
		return []outbox.EnqueueParams{
			{TenantID: tenant, Key: "chat", Tool: "test.echo", Args: json.RawMessage(`{"n": 1}`), ConversationID: "conv-1", ToolCallID: "call-1"},
			{TenantID: tenant, Key: "plain", Tool: "test.echo", Args: json.RawMessage(`{"n":2}`)},
			{TenantID: tenant, Key: "purged", Tool: "test.echo", Args: json.RawMessage(`{"n":3}`)},
		}
	}

	first := e.call("first", 1)
	<-e.held
	var grouped []<-chan answer
	for _, params := range calls(e.tenant) {
		grouped = append(grouped, e.enqueue(params))
	}
	require.Eventually(t, func() bool { return e.ob.GroupWaitingForTest() == len(grouped) }, 10*time.Second, time.Millisecond)
	e.release <- struct{}{}
	require.NoError(t, (<-first).err)
	<-e.held
	e.release <- struct{}{}
	for _, c := range grouped {
		a := <-c
		require.NoError(t, a.err, a.key)
		want := 0
		if a.key == "purged" {
			want = 5
		}
		require.Equal(t, want, a.res.Op.Generation, a.key)
		require.Equal(t, vendorapi.VendorKey(e.tenant, a.key, "test.echo", want), a.res.Op.VendorKey, a.key)
	}
	for _, params := range calls(other) {
		_, err := alone.Enqueue(ctx, params)
		require.NoError(t, err, params.Key)
	}

	rows := func(tenant int64) string {
		var s string
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT json_agg(o ORDER BY o.idempotency_key)::text FROM (
			SELECT idempotency_key, tool, vendor, args, fingerprint, status, attempts, generation, conversation_id,
				tool_call_id, retention, expires_at - created_at AS ttl, sealed_args, trace_parent, tool_definition,
				vendor_account, length(vendor_key) AS vendor_key_length
			FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key <> 'first') o`, tenant).Scan(&s))
		return s
	}
	require.JSONEq(t, rows(other), rows(e.tenant))
	require.Contains(t, rows(e.tenant), `"vendor_account":"acct_7"`)
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(DISTINCT xmin::text) FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key <> 'first'", e.tenant),
		"the calls were one group")
	requireOneJobPerOp(t, e.pool, 7)
}

// TestGroupCommitPanicFailsOnlyItsCall: a call that panics (a bug) rolls its group back;
// it fails alone, with an error, and the group's other calls run alone and commit; the
// process and the next groups go on.
func TestGroupCommitPanicFailsOnlyItsCall(t *testing.T) {
	t.Parallel()
	e := newGroupEnv(t)
	first, others := e.holdFirst(t, map[string]int{"a": 1, "b": 777, "c": 2})
	e.release <- struct{}{}
	require.NoError(t, (<-first).err)
	e.letGo()
	defer close(e.held)
	answers := collect(others)
	require.ErrorContains(t, answers["b"].err, "panicked")
	for _, key := range []string{"a", "c"} {
		require.NoError(t, answers[key].err, key)
		require.False(t, answers[key].res.Replayed, key)
	}
	require.Equal(t, 2, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op WHERE idempotency_key IN ('a', 'b', 'c')"), "a and c")
	require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op WHERE idempotency_key = 'b'"))
	requireOneJobPerOp(t, e.pool, 3)
	d := <-e.call("d", 1)
	require.NoError(t, d.err, "a call after the panic")
	require.False(t, d.res.Replayed)
}
