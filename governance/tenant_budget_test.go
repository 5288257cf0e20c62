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
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendorapi"
)

// admitMany asks 100 concurrent ops of the tenant, alternately of govs[0] and govs[1],
// and returns how many were admitted and how many refused over budget.
func admitMany(t *testing.T, govs [2]*governance.Governance, pools [2]*pgxpool.Pool, tenant int64, n int) (admitted, refused int) {
	t.Helper()
	errs := make([]error, n)
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
	for _, err := range errs {
		switch {
		case err == nil:
			admitted++
		case errors.Is(err, governance.ErrBudgetExceeded):
			refused++
		default:
			require.NoError(t, err)
		}
	}
	return admitted, refused
}

// TestTenantBudgetAcrossProcesses: two Governances on two pools (two processes), neither
// with a process-wide budget, both enforce the tenant's stored budget: 100 concurrent
// ops admit exactly its 10; another tenant is not bound by it. A change made through
// one process (a higher count) applies to the other's next op, without a restart, and
// a delete lets the tenant run free again.
func TestTenantBudgetAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	second, err := pgxpool.New(ctx, dbtest.ConnString(t, pool))
	require.NoError(t, err)
	t.Cleanup(second.Close)
	pools := [2]*pgxpool.Pool{pool, second}
	govs := [2]*governance.Governance{newGovernance(t, pool, nil), newGovernance(t, second, nil)}
	acme, other := newTenant(t, pool, "acme"), newTenant(t, pool, "other")

	// Both processes remember that acme has no budget of its own.
	_, err = admit(t, govs[0], pools[0], call{tenant: acme, tool: echoTool(), args: `{}`})
	require.NoError(t, err)
	_, err = admit(t, govs[1], pools[1], call{tenant: acme, tool: echoTool(), args: `{}`})
	require.NoError(t, err)

	b := governance.Budget{Name: "ten", Window: governance.Duration(24 * time.Hour), Count: 10, OnExceed: governance.ExceedRefuse}
	require.NoError(t, govs[0].SetTenantBudget(ctx, acme, b, "test"))
	admitted, refused := admitMany(t, govs, pools, acme, 100)
	require.Equal(t, 10, admitted)
	require.Equal(t, 90, refused)
	admitted, _ = admitMany(t, govs, pools, other, 20)
	require.Equal(t, 20, admitted, "another tenant has no budget")

	usage, err := govs[1].BudgetUsage(ctx, acme)
	require.NoError(t, err)
	require.Len(t, usage, 1)
	require.Equal(t, governance.SourceTenant, usage[0].Source)
	require.Equal(t, int64(10), usage[0].Used)
	require.Equal(t, int64(0), usage[0].Left)

	// Raised to 12 through process 0: process 1's next ops see it.
	b.Count = 12
	require.NoError(t, govs[0].SetTenantBudget(ctx, acme, b, "test"))
	for range 2 {
		_, err = admit(t, govs[1], pools[1], call{tenant: acme, tool: echoTool(), args: `{}`})
		require.NoError(t, err)
	}
	_, err = admit(t, govs[1], pools[1], call{tenant: acme, tool: echoTool(), args: `{}`})
	require.ErrorIs(t, err, governance.ErrBudgetExceeded)

	require.NoError(t, govs[1].DeleteTenantBudget(ctx, acme, "ten"))
	_, err = admit(t, govs[0], pools[0], call{tenant: acme, tool: echoTool(), args: `{}`})
	require.NoError(t, err, "the deleted budget no longer applies in the process that remembered it")
	require.ErrorIs(t, govs[1].DeleteTenantBudget(ctx, acme, "ten"), outbox.ErrNotFound)
}

// TestTenantBudgetOverridesTheDefaultByName: a tenant's budget replaces the default of
// the same name and adds to the others; a tenant without budgets has the defaults.
func TestTenantBudgetOverridesTheDefaultByName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	day := governance.Duration(24 * time.Hour)
	g := newGovernance(t, pool, nil,
		governance.Budget{Name: "daily", Window: day, Count: 1, OnExceed: governance.ExceedRefuse},
		governance.Budget{Name: "money", Tool: "test.money", Window: day, Amount: map[string]int64{"usd": 100}})
	acme, other := newTenant(t, pool, "acme"), newTenant(t, pool, "other")
	require.NoError(t, g.SetTenantBudget(ctx, acme, governance.Budget{Name: "daily", Window: day, Count: 3, OnExceed: governance.ExceedRefuse}, "ops@example.com"))
	require.NoError(t, g.SetTenantBudget(ctx, acme, governance.Budget{Name: "extra", Window: day, Count: 50}, "ops@example.com"))

	tbs, err := g.TenantBudgets(ctx, acme)
	require.NoError(t, err)
	got := map[string]governance.PolicySource{}
	for _, tb := range tbs {
		got[tb.Budget.Name] = tb.Source
		if tb.Source == governance.SourceTenant {
			require.Equal(t, "ops@example.com", tb.UpdatedBy)
			require.False(t, tb.UpdatedAt.IsZero())
		}
	}
	require.Equal(t, map[string]governance.PolicySource{"daily": "tenant", "extra": "tenant", "money": "default"}, got)

	for i := range 3 {
		_, err := admit(t, g, pool, call{tenant: acme, tool: echoTool(), args: fmt.Sprintf(`{"n": %d}`, i)})
		require.NoError(t, err, "acme's daily admits 3, not the default's 1")
	}
	_, err = admit(t, g, pool, call{tenant: acme, tool: echoTool(), args: `{}`})
	require.ErrorIs(t, err, governance.ErrBudgetExceeded)
	_, err = admit(t, g, pool, call{tenant: other, tool: echoTool(), args: `{}`})
	require.NoError(t, err)
	_, err = admit(t, g, pool, call{tenant: other, tool: echoTool(), args: `{"n": 1}`})
	require.ErrorIs(t, err, governance.ErrBudgetExceeded, "other has the default of 1")

	var verr *vendorapi.ValidationError
	require.ErrorAs(t, g.SetTenantBudget(ctx, acme, governance.Budget{Name: "bad", Window: day}, "x"), &verr)
	require.Contains(t, verr.Error(), "set count, amount, or both")
	require.ErrorAs(t, g.SetTenantBudget(ctx, acme, governance.Budget{Name: "t", Tool: "No Such", Window: day, Count: 1}, "x"), &verr,
		"a malformed tool name is refused")
	require.NoError(t, g.SetTenantBudget(ctx, acme, governance.Budget{Name: "t", Tool: "ledger.post", Window: day, Count: 1}, "x"),
		"a catalog or upstream tool this process has not loaded is accepted by name")
}
