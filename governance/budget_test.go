package governance_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestBudgetAdmitsExactlyItsCountAcrossProcesses: 100 concurrent ops against a budget
// of 10, asked of two Governances on two pools (two processes), admit exactly 10; the
// other 90 are refused with the budget's name and when to retry.
func TestBudgetAdmitsExactlyItsCountAcrossProcesses(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	second, err := pgxpool.New(context.Background(), dbtest.ConnString(t, pool))
	require.NoError(t, err)
	t.Cleanup(second.Close)
	b := governance.Budget{Name: "ten-a-day", Window: governance.Duration(24 * time.Hour), Count: 10, OnExceed: governance.ExceedRefuse}
	pools := [2]*pgxpool.Pool{pool, second}
	govs := [2]*governance.Governance{newGovernance(t, pool, nil, b), newGovernance(t, second, nil, b)}
	tenant := newTenant(t, pool, "acme")

	errs := make([]error, 100)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			_, errs[i] = admit(t, govs[i%2], pools[i%2], call{tenant: tenant, tool: echoTool(), args: fmt.Sprintf(`{"n": %d}`, i)})
		})
	}
	close(start)
	wg.Wait()
	admitted, refused := 0, 0
	for _, err := range errs {
		var be *governance.BudgetExceededError
		switch {
		case err == nil:
			admitted++
		case errors.As(err, &be):
			refused++
			require.ErrorIs(t, err, governance.ErrBudgetExceeded)
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
	usage, err := govs[1].BudgetUsage(context.Background(), tenant)
	require.NoError(t, err)
	require.Len(t, usage, 1)
	require.EqualValues(t, 10, usage[0].Used)
	require.EqualValues(t, 0, usage[0].Left)
}

// TestAmountBudgetHoldsTheRest: an amount budget per currency admits ops up to its
// sum; the op that would exceed it is held for a person, told which budget; a named
// currency counts apart, every currency the budget does not name shares the one "*"
// limit; other conversations count apart; an amount that cannot be counted is held.
func TestAmountBudgetHoldsTheRest(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	g := newGovernance(t, pool, nil, governance.Budget{Name: "conv-spend", Tool: "test.money", Scope: governance.ScopeConversation,
		Window: governance.Duration(time.Hour), Amount: map[string]int64{"usd": 1000, "*": 500}, OnExceed: governance.ExceedRefuse})
	tenant := newTenant(t, pool, "acme")
	pay := func(conv, args string) string {
		t.Helper()
		v, err := admit(t, g, pool, call{tenant: tenant, tool: moneyTool(), args: args, conversation: conv})
		require.NoError(t, err)
		return held(v)
	}
	require.Empty(t, pay("c1", `{"amount": 600, "currency": "usd"}`))
	require.Empty(t, pay("c1", `{"amount": 400, "currency": "usd"}`))
	_, err := admit(t, g, pool, call{tenant: tenant, tool: moneyTool(), args: `{"amount": 1, "currency": "usd"}`, conversation: "c1"})
	require.ErrorIs(t, err, governance.ErrBudgetExceeded, "over the usd limit: refused, as the budget says")
	require.Empty(t, pay("c1", `{"amount": 500, "currency": "eur"}`), "another currency counts apart")
	_, err = admit(t, g, pool, call{tenant: tenant, tool: moneyTool(), args: `{"amount": 1, "currency": "gbp"}`, conversation: "c1"})
	require.ErrorContains(t, err, "every currency it does not name together", "gbp shares the \"*\" limit eur used up")
	require.Empty(t, pay("c2", `{"amount": 1000, "currency": "usd"}`), "another conversation counts apart")
	require.Empty(t, pay("", `{"amount": 1000, "currency": "usd"}`), "no conversation: the token's ops without one count apart")
	_, err = admit(t, g, pool, call{tenant: tenant, tool: moneyTool(), args: `{"amount": 1, "currency": "usd"}`})
	require.ErrorIs(t, err, governance.ErrBudgetExceeded, "ops without a conversation are counted, not let through")
	require.Contains(t, pay("c3", `{}`), `so the budget "conv-spend" cannot count it`, "no amount: held whatever the budget says")

	usage, err := g.BudgetUsage(context.Background(), tenant)
	require.NoError(t, err)
	used, limits := map[string]int64{}, map[string]int64{}
	for _, u := range usage {
		used[u.Scope+"/"+u.Currency], limits[u.Scope+"/"+u.Currency] = u.Used, u.Limit
	}
	require.EqualValues(t, 10*1000, limits["conversations:token:none/usd"], "a token across its conversations: 10 conversations' worth")
	require.EqualValues(t, 1000, limits["no-conversation:token:none/usd"])
	require.Equal(t, map[string]int64{"conversation:c1/usd": 1000, "conversation:c1/*": 500, "conversation:c2/usd": 1000,
		"no-conversation:token:none/usd": 1000, "conversations:token:none/usd": 3000, "conversations:token:none/*": 500}, used)
}

func TestParseBudgets(t *testing.T) {
	t.Parallel()
	bs, err := governance.ParseBudgets(`[{"name": "refunds", "tool": "stripe.refund", "window": "24h", "amount": {"*": 50000}},
		{"name": "mail", "tool": "sendgrid.mail", "window": "1h", "count": 20, "scope": "conversation", "on_exceed": "refuse"}]`)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	require.Equal(t, 24*time.Hour, time.Duration(bs[0].Window))
	require.Equal(t, governance.OthersShared, bs[0].OtherCurrenciesOrDefault(), `"*" is one limit the currencies not named share`)
	bs, err = governance.ParseBudgets(`[{"name": "usd", "window": "1h", "amount": {"usd": 1}, "other_currencies": "approval"},
		{"name": "both", "window": "1h", "amount": {"usd": 1, "*": 5}, "other_currencies": "shared"}]`)
	require.NoError(t, err)
	require.Equal(t, governance.OthersApproval, bs[0].OtherCurrenciesOrDefault())
	require.Equal(t, governance.OthersShared, bs[1].OtherCurrenciesOrDefault())
	for _, bad := range []string{`[{"name": "x", "window": "1h"}]`, `[{"name": "x", "window": "0s", "count": 1}]`,
		`[{"name": "x", "window": "1h", "count": 1, "scope": "planet"}]`, `[{"name": "x", "window": "1h", "count": 1, "on_exceed": "panic"}]`,
		`[{"name": "x", "window": "1h", "count": 1}, {"name": "x", "window": "1h", "count": 2}]`, `[{"window": "1h", "count": 1}]`,
		`[{"name": "x", "window": "1h", "amount": {"usd": 1}, "other_currencies": "shared"}]`,
		`[{"name": "x", "window": "1h", "amount": {"*": 1}, "other_currencies": "approval"}]`,
		`[{"name": "x", "window": "1h", "amount": {"*": 1}, "other_currencies": "each"}]`,
		`[{"name": "x", "window": "1h", "count": 1, "conversations": 2}]`,
		`[{"name": "x", "window": "1h", "count": 1, "scope": "conversation", "conversations": -1}]`} {
		_, err := governance.ParseBudgets(bad)
		require.Error(t, err, bad)
	}
}
