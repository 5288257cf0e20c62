package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/tools"
)

// TestRefusedRefundGivesItsBudgetBack: on a server started without --budgets, the
// tenant's stored budget of 2 refunds and 50,000 (any currency) a day is listed by
// GET /v1/budgets and counts an admitted refund; a refund the fake Stripe refuses
// (more than the payment) fails, and gives its count and its amount back to the
// window it was charged in: used stays where it was.
func TestRefusedRefundGivesItsBudgetBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	call, agent, _, fake, pool := budgetServerPool(t, nil)
	acme, err := tenant.NewStore(pool).ByName(ctx, "acme")
	require.NoError(t, err)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{NoMailRedaction: true})...)
	require.NoError(t, err)
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg})
	require.NoError(t, err)
	require.NoError(t, gov.SetTenantBudget(ctx, acme.ID, governance.Budget{Name: "refunds", Tool: "stripe.refund",
		Window: governance.Duration(24 * time.Hour), Count: 2, Amount: map[string]int64{"*": 50000}}, "test"))

	status, pay := call("POST", "/v1/ops?wait=20s", agent, "pay",
		`{"tool": "stripe.payment_intent", "args": {"amount": 29000, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}}`)
	require.Equal(t, http.StatusAccepted, status, pay)
	require.Equal(t, "succeeded", pay["status"], pay)
	pi := pay["vendor_ref"].(string)

	refund := func(key string, amount int) map[string]any {
		status, op := call("POST", "/v1/ops?wait=20s", agent, key,
			fmt.Sprintf(`{"tool": "stripe.refund", "args": {"payment_intent": %q, "amount": %d}}`, pi, amount))
		require.Equal(t, http.StatusAccepted, status, op)
		return op
	}
	require.Equal(t, "succeeded", refund("refund-1", 10000)["status"])
	require.Equal(t, float64(10000), budgetUsed(t, call, agent, "refunds", "*"))
	require.Equal(t, float64(1), budgetUsed(t, call, agent, "refunds", ""))

	// 40,000 fits the budget (10,000 + 40,000) but not the payment (19,000 left):
	// Stripe refuses it.
	failed := refund("refund-2", 40000)
	require.Equal(t, "failed", failed["status"], failed)
	require.Len(t, fake.Refunds(), 1)
	require.Equal(t, float64(10000), budgetUsed(t, call, agent, "refunds", "*"), "the refused refund gave its amount back")
	require.Equal(t, float64(1), budgetUsed(t, call, agent, "refunds", ""), "and its count")
	var charges int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM oncebox_budget_charge WHERE op_id = $1::uuid`, failed["id"]).Scan(&charges))
	require.Zero(t, charges, "the failed op's charges are gone")

	// What it gave back is there to use: a second refund within the count and amount.
	require.Equal(t, "succeeded", refund("refund-3", 9000)["status"])
	require.Equal(t, float64(19000), budgetUsed(t, call, agent, "refunds", "*"))
}
