package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestNoGateStillHoldsWhatTheToolSays: an Outbox built without a Gate (an embedder's
// insert-only one, say) is not a way around a tool's own approval rule: the op its
// NeedsApproval holds waits for a person, runs once approved, and one held under a
// tenant's rule by governance cannot be approved through it.
func TestNoGateStillHoldsWhatTheToolSays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	money := optest.MoneyTool()
	money.NeedsApproval = func(raw json.RawMessage) bool {
		amount, _, ok := money.Amount(raw)
		return !ok || amount > 1000
	}
	reg, err := outbox.NewRegistry(money)
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg})
	require.NoError(t, err)
	tenantID := optest.Tenant(t, pool, "acme")
	e := approvalEnv{env: env{pool: pool, ob: ob}, tenant: tenantID}

	small := e.pay(t, "small", `{"amount": 500, "currency": "usd"}`)
	require.Equal(t, protocol.StatusPending, small.Op.Status)
	require.Equal(t, 1, e.jobs(t, small.Op.ID))

	big := e.pay(t, "big", `{"amount": 5000, "currency": "usd"}`)
	require.Equal(t, protocol.StatusAwaitingApproval, big.Op.Status)
	require.NotEmpty(t, big.Why)
	require.Equal(t, 0, e.jobs(t, big.Op.ID), "a held op has no dispatch job")
	res, err := e.decide(true, "big", "alice")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusPending, res.Op.Status)
	require.Equal(t, 1, e.jobs(t, big.Op.ID))

	// A tenant's own rule, applied by governance on another Outbox of the same database,
	// holds an op that this Outbox cannot release: it cannot tell whether the rule holds.
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg})
	require.NoError(t, err)
	_, err = gov.SetTenantRule(ctx, tenantID, money.Name, governance.ApprovalRule{Mode: governance.ApprovalAlways})
	require.NoError(t, err)
	governed, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(t, err)
	held, err := governed.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenantID, Key: "ruled", Tool: money.Name,
		Args: json.RawMessage(`{"amount": 100, "currency": "usd"}`)})
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, held.Op.Status)
	_, err = e.decide(true, "ruled", "alice")
	require.ErrorIs(t, err, outbox.ErrPolicyChanged)
	require.Equal(t, 0, e.jobs(t, held.Op.ID))
}
