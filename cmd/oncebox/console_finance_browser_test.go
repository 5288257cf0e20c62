package main

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/tools"
)

// moneyCellsScript reads, on the Finance or Budgets page, the text of the cells that
// carry money and whether each lies whole inside the window's width.
const moneyCellsScript = `(() => {
  const out = [];
  for (const td of document.querySelectorAll('#nets td, #budgets td.limit, #budgets td.used, #budgets td.left, .unavailable')) {
    const r = td.getBoundingClientRect();
    const box = td.closest('.scroll');
    const shown = box ? box.getBoundingClientRect() : {left: 0, right: window.innerWidth};
    out.push({text: td.innerText, inside: r.left >= shown.left - 1 && r.right <= shown.right + 1 && r.right <= window.innerWidth + 1});
  }
  return out;
})()`

type moneyCell struct {
	Text   string `json:"text"`
	Inside bool   `json:"inside"`
}

// TestFinanceAndBudgetsInChromium: in headless Chromium at 390 and 1280 px, the Finance
// page of a tenant with an op on a Connect account Stripe refuses answers with the
// report (not a 500): a sentence on what was not checked, and paid, refunded and net
// per currency as money, every figure of it on screen; the Budgets page shows its
// limits as money and its window as people write it.
func TestFinanceAndBudgetsInChromium(t *testing.T) {
	browserPath := chromiumPath(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := startConsoleServe(ctx, t)
	op := cs.record(ctx, t, "order-1001", `{"tool":"stripe.payment_intent","args":{"amount":5000,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`)
	require.Equal(t, "succeeded", op["status"], op)
	_, err := cs.pool.Exec(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status,
		vendor_key, vendor_ref, vendor_account, expires_at, created_at)
		VALUES ($1, 'order-on-x', 'stripe.payment_intent', 'stripe', '{"amount":2000,"currency":"usd"}', '\x00', 'succeeded',
		'ob_x', 'pi_on_x', 'acct_x', now() + interval '1 day', now() - interval '1 minute')`, cs.tenant.ID)
	require.NoError(t, err)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{NoMailRedaction: true})...)
	require.NoError(t, err)
	gov, err := governance.New(governance.Config{Pool: cs.pool, Tools: reg})
	require.NoError(t, err)
	require.NoError(t, gov.SetTenantBudget(ctx, cs.tenant.ID, governance.Budget{Name: "payments", Window: governance.Duration(24 * time.Hour),
		Amount: map[string]int64{"usd": 500000}}, "test"))
	admin, err := cs.tenants.NewTokenWithRole(ctx, "acme", tenant.RoleAdmin)
	require.NoError(t, err)

	lc := &layoutChecker{t: t, ctx: newChromium(ctx, t, browserPath)}
	lc.run("sign in", chromedp.Navigate(cs.base+"/console/signin"), chromedp.WaitVisible(`#token`, chromedp.ByQuery),
		chromedp.SendKeys(`#token`, admin, chromedp.ByQuery), chromedp.Submit(`#token`, chromedp.ByQuery),
		chromedp.WaitVisible(`header nav`, chromedp.ByQuery))
	since, until := time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04:05Z"), time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05Z")
	for _, w := range screenWidths {
		lc.run("resize", emulation.SetDeviceMetricsOverride(w, 900, 1, false))
		var summary string
		var cells []moneyCell
		lc.run("finance", chromedp.Navigate(cs.base+"/console/finance?since="+since+"&until="+until),
			chromedp.WaitVisible(`#nets`, chromedp.ByQuery), chromedp.Text(`#report-summary`, &summary, chromedp.ByQuery),
			chromedp.Evaluate(moneyCellsScript, &cells))
		require.Contains(t, summary, "1 line(s) do not match the vendors, of which 1 could not be checked", w)
		texts := map[string]bool{}
		for _, c := range cells {
			texts[c.Text] = true
			require.True(t, c.Inside, "at %d px %q is off screen", w, c.Text)
		}
		require.True(t, texts["$50.00 USD"] && texts["$0.00 USD"], "paid, refunded and net as money at %d px: %v", w, cells)
		require.Contains(t, cells[0].Text, "Not checked: Stripe refused to list Stripe account acct_x", "the sentence comes first")

		lc.run("budgets", chromedp.Navigate(cs.base+"/console/budgets"), chromedp.WaitVisible(`#budgets`, chromedp.ByQuery),
			chromedp.Evaluate(moneyCellsScript, &cells))
		require.Len(t, cells, 3, "limit, used and left")
		require.Equal(t, []string{"$5,000.00 USD", "$0.00 USD", "$5,000.00 USD"}, []string{cells[0].Text, cells[1].Text, cells[2].Text})
		var window string
		lc.run("budget window", chromedp.Text(`#budgets tbody tr td:nth-child(5)`, &window, chromedp.ByQuery))
		require.Equal(t, "24h", window)
	}
}
