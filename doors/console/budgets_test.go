package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/tools"
)

// budgetCells returns the limit, used, left and waiting cells of the Budgets page's row
// of budget's currency ("" for its count of ops).
func budgetCells(t *testing.T, page, budget, currency string) [4]string {
	t.Helper()
	row := regexp.MustCompile(`(?s)<tr data-budget="` + regexp.QuoteMeta(budget) + `" data-currency="` + regexp.QuoteMeta(currency) + `"[^>]*>(.*?)</tr>`).FindStringSubmatch(page)
	require.NotNil(t, row, "a row of %s/%s in %s", budget, currency, page)
	var out [4]string
	for i, class := range []string{"limit", "used", "left", "waiting"} {
		m := regexp.MustCompile(`<td class="` + class + `"[^>]*>([^<]*)</td>`).FindStringSubmatch(row[1])
		require.NotNil(t, m, class)
		out[i] = m[1]
	}
	return out
}

// TestBudgetsPage: an admin's Budgets page shows every budget in force for the tenant,
// the installation's and the tenant's own, with its limit, what it used and has left,
// and how many ops wait for approval because of it; an approver has no Budgets link,
// and the page refuses it with 403 forbidden, as the console refuses a token it does
// not serve.
func TestBudgetsPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startWith(t, func(c *server.Config) {
		c.RefundApprovalAbove = 0
		c.Budgets = []governance.Budget{{Name: "refunds", Tool: "stripe.refund", Window: governance.Duration(24 * time.Hour),
			Amount: map[string]int64{"*": 2000}}}
	})
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{NoMailRedaction: true})...)
	require.NoError(t, err)
	gov, err := governance.New(governance.Config{Pool: e.pool, Tools: reg})
	require.NoError(t, err)
	require.NoError(t, gov.SetTenantBudget(ctx, e.tenant.ID, governance.Budget{Name: "payments", Tool: "stripe.payment_intent",
		Window: governance.Duration(time.Hour), Count: 10, Amount: map[string]int64{"usd": 5000}}, "test"))
	pay := e.api(t, "pay-2", `{"tool":"stripe.payment_intent","args":{"amount":700,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`)
	require.Equal(t, "succeeded", pay["status"], pay)

	admin, err := tenant.NewStore(e.pool).NewTokenWithRole(ctx, "acme", tenant.RoleAdmin)
	require.NoError(t, err)
	b := newBrowser(t, e.base)
	_, home := b.signIn(admin)
	require.Contains(t, home, `href="/console/budgets"`)
	resp, page := b.get("/console/budgets")
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	// The refund of 2,500 start() asks for is over the 2,000 budget: it waits.
	other := " minor units of any other currency"
	require.Equal(t, [4]string{"2,000" + other, "0" + other, "2,000" + other, "1"}, budgetCells(t, page, "refunds", "*"))
	require.Equal(t, [4]string{"10", "1", "9", "0"}, budgetCells(t, page, "payments", ""))
	require.Equal(t, [4]string{"$50.00 USD", "$7.00 USD", "$43.00 USD", "0"}, budgetCells(t, page, "payments", "usd"), "money as money")
	require.Regexp(t, strings.ReplaceAll(`<td>payments</td><td>tenant</td><td>stripe.payment_intent</td><td>tenant</td><td>1h</td>`, "<td>", cellTag), page)
	require.Regexp(t, strings.ReplaceAll(`<td>refunds</td><td>default</td><td>stripe.refund</td><td>tenant</td><td>24h</td>\s*<td>any other currency</td>`, "<td>", cellTag), page,
		"windows as people write them")
	require.Regexp(t, cellTag+`refunds</td>`+cellTag+`default</td>`, page)

	ab := newBrowser(t, e.base)
	_, home = ab.signIn(e.approver)
	require.NotContains(t, home, `href="/console/budgets"`, "an approver has no Budgets link")
	resp, page = ab.get("/console/budgets")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "forbidden", reasonOf(page))
	require.Contains(t, page, "needs an admin token")
	require.NotContains(t, page, "payments")
}
