package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
)

// TestBudgetsOverHTTP: a refusing count budget answers 429 budget-exceeded with
// Retry-After and records nothing; an amount budget sends the op over it to approval,
// saying why; GET /v1/budgets shows used and left.
func TestBudgetsOverHTTP(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"crm"}})...)
	require.NoError(t, err)
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg, Budgets: []governance.Budget{
		{Name: "two-payments", Tool: "stripe.payment_intent", Window: governance.Duration(time.Hour), Count: 2, OnExceed: governance.ExceedRefuse},
		{Name: "refund-spend", Tool: "stripe.refund", Window: governance.Duration(24 * time.Hour), Amount: map[string]int64{"*": 1000}},
	}})
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(t, err)
	tenants := tenant.NewStore(pool)
	srv, err := api.New(api.Config{Outbox: ob, Governance: gov, Tenants: tenants})
	require.NoError(t, err)
	e := &env{pool: pool, ob: ob, gov: gov, tenants: tenants, srv: srv}
	_, agent := e.newTenant(t, "acme")
	approver := e.newToken(t, "acme", tenant.RoleApprover)

	for i := range 2 {
		require.Equal(t, http.StatusAccepted, e.post(agent, fmt.Sprintf("pay-%d", i), paymentBody).Code)
	}
	rec := e.post(agent, "pay-2", paymentBody)
	p := requireProblem(t, rec, http.StatusTooManyRequests, "budget-exceeded")
	require.Contains(t, p.Detail, `"two-payments"`)
	secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.True(t, secs >= 1 && secs <= 3600, secs)
	require.Equal(t, 2, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op"), "a refused op is not recorded")
	require.Equal(t, http.StatusOK, e.post(agent, "pay-1", paymentBody).Code, "a replay is answered, not refused")

	require.Equal(t, "pending", decodeOp(t, e.post(agent, "r1", smallRefundBody)).Status)
	require.Equal(t, "pending", decodeOp(t, e.post(agent, "r2", smallRefundBody)).Status, "500 + 500 is the whole budget")
	over := decodeOp(t, e.post(agent, "r3", `{"tool": "stripe.refund", "args": {"payment_intent": "pi_123", "amount": 600}}`))
	require.Equal(t, "awaiting_approval", over.Status)
	rec = e.do(req("GET", "/v1/approvals", approver, "", ""))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `budget \"refund-spend\"`, "the approver sees which budget")

	rec = e.do(req("GET", "/v1/budgets", agent, "", ""))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var body struct {
		Budgets []struct {
			Budget, Scope, Currency string
			Used, Limit, Left       int64
		}
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	got := map[string][3]int64{}
	for _, b := range body.Budgets {
		got[b.Budget+"/"+b.Scope+"/"+b.Currency] = [3]int64{b.Used, b.Limit, b.Left}
	}
	require.Equal(t, map[string][3]int64{
		"two-payments/tenant/":  {2, 2, 0},
		"refund-spend/tenant/*": {1000, 1000, 0},
	}, got)
}

// TestBudgetsListTheTenantsOwn: GET /v1/budgets lists the tenant's own budgets, stored
// in Postgres, over the defaults (source tenant or default), with what they used; another
// tenant sees only the defaults.
func TestBudgetsListTheTenantsOwn(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"crm"}})...)
	require.NoError(t, err)
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg, Budgets: []governance.Budget{
		{Name: "default-ops", Window: governance.Duration(time.Hour), Count: 100},
	}})
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(t, err)
	tenants := tenant.NewStore(pool)
	srv, err := api.New(api.Config{Outbox: ob, Governance: gov, Tenants: tenants})
	require.NoError(t, err)
	e := &env{pool: pool, ob: ob, gov: gov, tenants: tenants, srv: srv}
	acme, agent := e.newTenant(t, "acme")
	_, otherAgent := e.newTenant(t, "other")
	require.NoError(t, gov.SetTenantBudget(t.Context(), acme.ID, governance.Budget{Name: "payments", Tool: "stripe.payment_intent",
		Window: governance.Duration(24 * time.Hour), Count: 5}, "test"))
	require.Equal(t, http.StatusAccepted, e.post(agent, "pay-0", paymentBody).Code)

	list := func(token string) map[string][4]any {
		rec := e.do(req("GET", "/v1/budgets", token, "", ""))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var body struct {
			Budgets []struct {
				Budget, Source    string
				Used, Limit, Left int64
			}
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		got := map[string][4]any{}
		for _, b := range body.Budgets {
			got[b.Budget] = [4]any{b.Source, b.Used, b.Limit, b.Left}
		}
		return got
	}
	require.Equal(t, map[string][4]any{
		"default-ops": {"default", int64(1), int64(100), int64(99)},
		"payments":    {"tenant", int64(1), int64(5), int64(4)},
	}, list(agent))
	require.Equal(t, map[string][4]any{"default-ops": {"default", int64(0), int64(100), int64(100)}}, list(otherAgent))
}
