package governance_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendorapi"
)

// TestInstallationPolicyIsStoredAndSeededOnce: the first process's flags seed the
// installation's stored rule and budget; a second process started with other flags
// stores nothing, is told which stored ones differ, and applies the stored ones, not
// its flags; a change stored by one process applies to the other's next op; a tenant's
// own rule still overrides the stored default.
func TestInstallationPolicyIsStoredAndSeededOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	acme := newTenant(t, pool, "acme")
	first, second := newGovernance(t, pool, nil), newGovernance(t, pool, nil)
	day := governance.Duration(24 * time.Hour)
	res, err := first.SeedInstallation(ctx, governance.Seed{By: "seed: first",
		Approvals: governance.ApprovalPolicy{"test.money": {Mode: governance.ApprovalAlways}},
		Budgets:   []governance.Budget{{Name: "echoes", Tool: "test.echo", Window: day, Count: 1, OnExceed: governance.ExceedRefuse}}})
	require.NoError(t, err)
	require.Equal(t, []string{"approval test.money", "budget echoes"}, res.Stored)
	require.Empty(t, res.Kept)

	res, err = second.SeedInstallation(ctx, governance.Seed{By: "seed: second",
		Approvals: governance.ApprovalPolicy{"test.money": {Mode: governance.ApprovalNever}},
		Budgets:   []governance.Budget{{Name: "echoes", Tool: "test.echo", Window: day, Count: 5}}})
	require.NoError(t, err)
	require.Empty(t, res.Stored, "flags only seed what is not stored")
	require.Len(t, res.Kept, 2)
	require.Equal(t, "seed: first", res.Kept[0].UpdatedBy)

	pay := func(g *governance.Governance) string {
		t.Helper()
		v, err := admit(t, g, pool, call{tenant: acme, tool: moneyTool(), args: `{"amount": 1, "currency": "usd"}`})
		require.NoError(t, err)
		return held(v)
	}
	require.NotEmpty(t, pay(second), "the stored rule, not the second process's flags")
	_, err = admit(t, second, pool, call{tenant: acme, tool: echoTool(), args: `{}`})
	require.NoError(t, err)
	_, err = admit(t, first, pool, call{tenant: acme, tool: echoTool(), args: `{}`})
	require.ErrorIs(t, err, governance.ErrBudgetExceeded, "one stored budget of 1, counted across both processes")

	require.NotEmpty(t, pay(first))
	e, err := second.SetDefaultRule(ctx, "test.money", governance.ApprovalRule{Mode: governance.ApprovalNever}, "cli:ops")
	require.NoError(t, err)
	require.Equal(t, governance.SourceDefault, e.Source)
	require.Empty(t, pay(first), "the first process applies the change to its next op")

	_, err = first.SetTenantRule(ctx, acme, "test.money", governance.ApprovalRule{Mode: governance.ApprovalAlways})
	require.NoError(t, err)
	require.NotEmpty(t, pay(second), "a tenant's own rule overrides the stored default")

	in, err := first.Installation(ctx)
	require.NoError(t, err)
	require.Len(t, in.Rules, 1)
	require.Equal(t, "cli:ops", in.Rules[0].UpdatedBy)
	require.Len(t, in.Budgets, 1)
	require.NoError(t, first.DeleteDefaultBudget(ctx, "echoes"))
	require.ErrorIs(t, first.DeleteDefaultBudget(ctx, "echoes"), outbox.ErrNotFound)
	require.NoError(t, first.ClearDefaultRule(ctx, "test.money"))
	var verr *vendorapi.ValidationError
	_, err = first.SetDefaultRule(ctx, "Not A Tool", governance.ApprovalRule{Mode: governance.ApprovalNever}, "x")
	require.ErrorAs(t, err, &verr)
}
