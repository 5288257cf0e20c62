package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// budgetEnv is two insert-only Outboxes on two pools over one schema: two processes.
type budgetEnv struct {
	pool   *pgxpool.Pool
	obs    [2]*outbox.Outbox
	govs   [2]*governance.Governance
	tenant int64
}

func newBudgetEnv(t *testing.T, budgets ...governance.Budget) budgetEnv {
	t.Helper()
	pool := dbtest.Schema(t)
	second, err := pgxpool.New(context.Background(), dbtest.ConnString(t, pool))
	require.NoError(t, err)
	t.Cleanup(second.Close)
	e := budgetEnv{pool: pool, tenant: optest.Tenant(t, pool, "acme")}
	for i, p := range []*pgxpool.Pool{pool, second} {
		reg, err := outbox.NewRegistry(optest.MoneyTool(), echoTool("echo"))
		require.NoError(t, err)
		e.govs[i] = newGate(t, p, reg, nil, budgets...)
		e.obs[i], err = outbox.New(outbox.Config{Pool: p, Tools: reg, Gate: e.govs[i]})
		require.NoError(t, err)
	}
	return e
}

// race enqueues n distinct ops at once, alternating between the two Outboxes, and
// returns their results and errors.
func (e budgetEnv) race(t *testing.T, n int, params func(i int) outbox.EnqueueParams) ([]*outbox.EnqueueResult, []error) {
	t.Helper()
	res, errs := make([]*outbox.EnqueueResult, n), make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i], errs[i] = e.obs[i%2].Enqueue(context.Background(), params(i))
		}()
	}
	close(start)
	wg.Wait()
	return res, errs
}

// TestBudgetAdmitsExactlyItsCountAcrossProcesses: 100 concurrent ops against a budget
// of 10, sent through two Outboxes on two pools, admit exactly 10; the other 90 are
// refused with the budget's name and when to retry, and record nothing.
func TestBudgetAdmitsExactlyItsCountAcrossProcesses(t *testing.T) {
	t.Parallel()
	e := newBudgetEnv(t, governance.Budget{Name: "ten-a-day", Window: governance.Duration(24 * time.Hour), Count: 10, OnExceed: governance.ExceedRefuse})
	_, errs := e.race(t, 100, func(i int) outbox.EnqueueParams {
		return outbox.EnqueueParams{TenantID: e.tenant, Key: fmt.Sprintf("k%d", i), Tool: "test.echo", Args: json.RawMessage(`{"n": 1}`)}
	})
	admitted, refused := 0, 0
	for _, err := range errs {
		var be *governance.BudgetExceededError
		switch {
		case err == nil:
			admitted++
		case errors.As(err, &be):
			refused++
			require.Equal(t, "ten-a-day", be.Budget)
			require.Contains(t, be.Sentence, `"ten-a-day"`)
			require.Positive(t, be.RetryAfter)
			require.LessOrEqual(t, be.RetryAfter, 24*time.Hour)
		default:
			require.NoError(t, err)
		}
	}
	require.Equal(t, 10, admitted)
	require.Equal(t, 90, refused)
	require.Equal(t, 10, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))
	require.Equal(t, 10, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch'"))

	// A replay of an admitted op is no new op: it is answered, and counts nothing.
	res, err := e.obs[1].Enqueue(context.Background(), outbox.EnqueueParams{TenantID: e.tenant, Key: keyOf(t, e.pool), Tool: "test.echo", Args: json.RawMessage(`{"n": 1}`)})
	require.NoError(t, err)
	require.True(t, res.Replayed)
	usage, err := e.govs[0].BudgetUsage(context.Background(), e.tenant)
	require.NoError(t, err)
	require.Len(t, usage, 1)
	require.EqualValues(t, 10, usage[0].Used)
	require.EqualValues(t, 0, usage[0].Left)
}

func keyOf(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var k string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT idempotency_key FROM oncebox_op LIMIT 1").Scan(&k))
	return k
}

// TestAmountBudgetSendsTheRestToApproval: an amount budget per currency admits ops up
// to its sum; the op that would exceed it waits for approval, told which budget; a named
// currency counts apart, every currency the budget does not name shares the one "*"
// limit; other conversations count apart, ops naming none count together; usage
// survives (it is in Postgres).
func TestAmountBudgetSendsTheRestToApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newBudgetEnv(t, governance.Budget{Name: "conv-spend", Tool: "test.money", Scope: governance.ScopeConversation,
		Window: governance.Duration(time.Hour), Amount: map[string]int64{"usd": 1000, "*": 500}})
	pay := func(key, conv, args string) *outbox.EnqueueResult {
		res, err := e.obs[0].Enqueue(ctx, outbox.EnqueueParams{TenantID: e.tenant, Key: key, Tool: "test.money", Args: json.RawMessage(args), ConversationID: conv})
		require.NoError(t, err)
		return res
	}
	require.Equal(t, protocol.StatusPending, pay("a", "c1", `{"amount": 600, "currency": "usd"}`).Op.Status)
	require.Equal(t, protocol.StatusPending, pay("b", "c1", `{"amount": 400, "currency": "usd"}`).Op.Status)
	over := pay("c", "c1", `{"amount": 1, "currency": "usd"}`)
	require.Equal(t, protocol.StatusAwaitingApproval, over.Op.Status)
	require.Contains(t, over.Why, `budget "conv-spend"`)
	require.Contains(t, over.Why, "of $10.00 USD in test.money ops")
	require.Equal(t, protocol.StatusPending, pay("d", "c1", `{"amount": 500, "currency": "eur"}`).Op.Status, "another currency counts apart")
	shared := pay("d2", "c1", `{"amount": 1, "currency": "gbp"}`)
	require.Equal(t, protocol.StatusAwaitingApproval, shared.Op.Status, "gbp shares the \"*\" limit eur used up")
	require.Contains(t, shared.Why, "every currency it does not name together")
	require.Equal(t, protocol.StatusPending, pay("e", "c2", `{"amount": 1000, "currency": "usd"}`).Op.Status, "another conversation counts apart")
	require.Equal(t, protocol.StatusAwaitingApproval, pay("f", "", `{"amount": 5000, "currency": "usd"}`).Op.Status,
		"no conversation is a bucket of its own (issue 49), not a way around the budget")
	require.Equal(t, protocol.StatusPending, pay("g", "", `{"amount": 300, "currency": "usd"}`).Op.Status)

	usage, err := e.govs[1].BudgetUsage(ctx, e.tenant)
	require.NoError(t, err)
	used := map[string]int64{}
	for _, u := range usage {
		used[u.Scope+"/"+u.Currency] = u.Used
	}
	require.Equal(t, map[string]int64{"conversation:c1/usd": 1000, "conversation:c1/*": 500, "conversation:c2/usd": 1000,
		"no-conversation:token:none/usd": 300,
		// Every op of the caller also counts across its conversations (at 10 times the limit).
		"conversations:token:none/usd": 2300, "conversations:token:none/*": 500}, used)
}

// TestBudgetRefusalInTheCallersTransaction: an op the gate refuses inside the caller's
// transaction leaves nothing there (the caller may commit its own rows), and a replay of
// an admitted op is answered although the budget is used up: it is told apart before
// anything is charged.
func TestBudgetRefusalInTheCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newBudgetEnv(t, governance.Budget{Name: "one", Window: governance.Duration(time.Hour), Count: 1, OnExceed: governance.ExceedRefuse})
	params := func(key string) outbox.EnqueueParams {
		return outbox.EnqueueParams{TenantID: e.tenant, Key: key, Tool: "test.echo", Args: json.RawMessage(`{"n": 1}`)}
	}
	_, err := e.obs[0].Enqueue(ctx, params("first"))
	require.NoError(t, err)

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = e.obs[0].EnqueueTx(ctx, tx, params("second"))
	require.ErrorIs(t, err, governance.ErrBudgetExceeded)
	replay, err := e.obs[0].EnqueueTx(ctx, tx, params("first"))
	require.NoError(t, err, "a replay is no new op: the budget is not asked")
	require.True(t, replay.Replayed)
	require.NoError(t, tx.Commit(ctx))

	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch'"))
	usage, err := e.govs[0].BudgetUsage(ctx, e.tenant)
	require.NoError(t, err)
	require.Len(t, usage, 1)
	require.EqualValues(t, 1, usage[0].Used)
}
