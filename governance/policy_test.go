package governance_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendorapi"
)

// TestApprovalRuleHoldsPerCurrencyAndTenant: the default rule holds what is above its
// threshold for the currency (else "*"), and what has no amount; a tenant's own rule
// overrides it for that tenant only, until cleared.
func TestApprovalRuleHoldsPerCurrencyAndTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	g := newGovernance(t, pool, governance.ApprovalPolicy{
		"test.money": {Mode: governance.ApprovalAbove, Above: map[string]int64{"usd": 1000, governance.AnyCurrency: 100}},
	})
	acme, other := newTenant(t, pool, "acme"), newTenant(t, pool, "other")
	pay := func(tenant int64, args string) string {
		t.Helper()
		v, err := admit(t, g, pool, call{tenant: tenant, tool: moneyTool(), args: args})
		require.NoError(t, err)
		return held(v)
	}
	require.Empty(t, pay(acme, `{"amount": 500, "currency": "usd"}`), "under the usd threshold")
	require.Contains(t, pay(acme, `{"amount": 5000, "currency": "usd"}`), "A test.money of $50.00 USD is above the approval threshold of $10.00 USD.")
	require.NotEmpty(t, pay(acme, `{"amount": 500, "currency": "eur"}`), "other currencies fall back to *")
	require.Contains(t, pay(acme, `{}`), "without an amount", "no amount never skips approval")

	_, err := g.SetTenantRule(ctx, acme, "test.money", governance.ApprovalRule{Mode: governance.ApprovalNever})
	require.NoError(t, err)
	require.Empty(t, pay(acme, `{"amount": 9000, "currency": "usd"}`))
	require.NotEmpty(t, pay(other, `{"amount": 9000, "currency": "usd"}`))

	_, err = g.SetTenantRule(ctx, acme, "test.money", governance.ApprovalRule{Mode: governance.ApprovalAbove})
	require.Error(t, err, "above without thresholds")
	var verr *vendorapi.ValidationError
	_, err = g.SetTenantRule(ctx, acme, "No Such Tool", governance.ApprovalRule{Mode: governance.ApprovalNever})
	require.ErrorAs(t, err, &verr, "a malformed tool name is refused")
	require.NoError(t, g.ClearTenantRule(ctx, acme, "test.money"))
	require.NotEmpty(t, pay(acme, `{"amount": 9001, "currency": "usd"}`), "the default applies again")
	require.ErrorIs(t, g.ClearTenantRule(ctx, acme, "test.money"), outbox.ErrNotFound)

	pol, err := g.EffectivePolicy(ctx, acme)
	require.NoError(t, err)
	require.Len(t, pol, 2)
}

// TestRememberedRuleIsCheckedAgainstTheStoredVersion: a rule another process changed
// is read again (the version the insert read differs from the remembered one), and an
// approval is bound to the version its op waits under.
func TestRememberedRuleIsCheckedAgainstTheStoredVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	g, other := newGovernance(t, pool, nil), newGovernance(t, pool, nil)
	tenant := newTenant(t, pool, "acme")
	big := call{tenant: tenant, tool: moneyTool(), args: `{"amount": 5000, "currency": "usd"}`}
	v, err := admit(t, g, pool, big)
	require.NoError(t, err)
	require.Nil(t, v.Hold)

	_, err = other.SetTenantRule(ctx, tenant, "test.money", governance.ApprovalRule{Mode: governance.ApprovalAlways, Approvers: 2})
	require.NoError(t, err)
	v, err = admit(t, g, pool, big)
	require.NoError(t, err)
	require.NotNil(t, v.Hold, "the rule set by another process applies at once")
	require.Equal(t, 2, v.Hold.Approvers)

	op := &outbox.Op{TenantID: tenant, Tool: "test.money"}
	check := func(version string) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return g.CheckApproval(ctx, tx, op, moneyTool(), version) })
	}
	require.NoError(t, check(v.Hold.PolicyVersion))
	_, err = other.SetTenantRule(ctx, tenant, "test.money", governance.ApprovalRule{Mode: governance.ApprovalAlways})
	require.NoError(t, err)
	require.ErrorIs(t, check(v.Hold.PolicyVersion), outbox.ErrPolicyChanged)
}

func TestParseApprovalPolicy(t *testing.T) {
	t.Parallel()
	p, err := governance.ParseApprovalPolicy(`{"stripe.refund": {"mode": "above", "above": {"*": 10000, "usd": 5000}, "approvers": 2},
		"sendgrid.mail": {"mode": "always"}}`)
	require.NoError(t, err)
	require.Equal(t, 2, p["stripe.refund"].Approvers)
	require.Equal(t, governance.ApprovalAlways, p["sendgrid.mail"].Mode)
	for _, bad := range []string{`{"x": {"mode": "sometimes"}}`, `{"x": {"mode": "above"}}`, `{"x": {"mode": "always", "above": {"*": 1}}}`,
		`{"x": {"mode": "above", "above": {"USD": 1}}}`, `{"x": {"mode": "never", "extra": 1}}`, `[]`} {
		_, err := governance.ParseApprovalPolicy(bad)
		require.Error(t, err, bad)
	}
	p, err = governance.ParseApprovalPolicy("")
	require.NoError(t, err)
	require.Nil(t, p)
}
