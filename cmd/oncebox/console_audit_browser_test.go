package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"
)

// auditRowsScript reads the Audit page's table: per row, its op and its cells' text.
const auditRowsScript = `Array.from(document.querySelectorAll('#audit tbody tr')).map(tr => ({
  op: tr.dataset.op || '', kind: tr.dataset.kind, cells: Array.from(tr.cells).map(td => td.innerText.trim())
}))`

type auditRowSeen struct {
	Op    string   `json:"op"`
	Kind  string   `json:"kind"`
	Cells []string `json:"cells"`
}

// TestConsoleAuditInChromium: in headless Chromium against a real `oncebox serve`, an
// approver named grace approves a refund in the console and signs out; the refund
// succeeds and its op row is purged; an auditor signs in, lands on the Audit page (its
// only page), filters by grace's name and reads the refund's story: the call, the
// approval by grace, and its success with Stripe's refund id and amount.
func TestConsoleAuditInChromium(t *testing.T) {
	browserPath := chromiumPath(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := startConsoleServe(ctx, t)
	grace, err := cs.tenants.NewTokenFor(ctx, "acme", tenant.RoleApprover, "grace@acme.test")
	require.NoError(t, err)
	auditor, err := cs.tenants.NewTokenFor(ctx, "acme", tenant.RoleAuditor, "ida@acme.test")
	require.NoError(t, err)
	pay := cs.record(ctx, t, "order-2001-pay", `{"tool":"stripe.payment_intent","args":{"amount":5000,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`)
	require.Equal(t, "succeeded", pay["status"], pay)
	const refundKey = "order-2001-refund"
	op := cs.record(ctx, t, refundKey, `{"tool":"stripe.refund","args":{"payment_intent":"`+pay["vendor_ref"].(string)+`","amount":2500}}`)
	require.Equal(t, "awaiting_approval", op["status"], op)
	refundID := op["id"].(string)

	bctx := newChromium(ctx, t, browserPath)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		require.NoError(t, chromedp.Run(bctx, actions...), what)
	}
	signIn := func(token string) {
		run("sign in", chromedp.Navigate(cs.base+"/console/"), chromedp.WaitVisible(`#token`, chromedp.ByQuery),
			chromedp.SendKeys(`#token`, token, chromedp.ByQuery), chromedp.Submit(`#token`, chromedp.ByQuery),
			chromedp.WaitVisible(`header nav`, chromedp.ByQuery))
	}
	signIn(grace)
	card := `article[data-key="` + refundKey + `"]`
	run("approve", chromedp.Navigate(cs.base+"/console/approvals"), chromedp.WaitVisible(card, chromedp.ByQuery),
		chromedp.SendKeys(card+` input[name=reason]`, "customer called", chromedp.ByQuery),
		chromedp.Click(card+` button.approve`, chromedp.ByQuery), chromedp.WaitVisible(`p.notice`, chromedp.ByQuery),
		chromedp.Click(`form.signout button`, chromedp.ByQuery), chromedp.WaitVisible(`#token`, chromedp.ByQuery))

	var ref string
	require.Eventually(t, func() bool {
		err := cs.pool.QueryRow(ctx, "SELECT coalesce(vendor_ref, '') FROM oncebox_op WHERE id = $1 AND status = 'succeeded'", refundID).Scan(&ref)
		return err == nil && ref != ""
	}, 30*time.Second, 200*time.Millisecond, "the approved refund succeeds")
	// The TTL purge's delete: the op and its history go, the audit log stays.
	tag, err := cs.pool.Exec(ctx, "DELETE FROM oncebox_op WHERE id = $1", refundID)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "the op row is gone")

	signIn(auditor)
	var nav string
	run("lands on the Audit page", chromedp.WaitVisible(`#audit-filters`, chromedp.ByQuery), chromedp.Text(`header nav`, &nav, chromedp.ByQuery))
	require.Equal(t, "Audit", strings.TrimSpace(nav), "an auditor's only page")
	var rows []auditRowSeen
	run("filter by person", chromedp.SendKeys(`input[name=person]`, "grace@acme.test", chromedp.ByQuery),
		chromedp.Submit(`input[name=person]`, chromedp.ByQuery), chromedp.WaitVisible(`#audit tr[data-op="`+refundID+`"]`, chromedp.ByQuery),
		chromedp.Evaluate(auditRowsScript, &rows))
	// Columns: time, kind, op, who, tool, status, vendor ref, amount, detail, sealed.
	byKind := map[string][]string{}
	for _, r := range rows {
		require.Equal(t, refundID, r.Op, "only the op grace decided on: %v", rows)
		byKind[r.Cells[1]] = r.Cells
	}
	require.Equal(t, "call", rows[0].Kind, "the story starts with the call: %v", rows)
	require.Equal(t, "stripe.refund", rows[0].Cells[4])
	require.Contains(t, rows[0].Cells[8], refundKey)
	require.Contains(t, byKind, "approval_requested", "%v", rows)
	approved := byKind["event: approved"]
	require.NotNil(t, approved, "%v", rows)
	require.Equal(t, "grace@acme.test (approver)", approved[3])
	require.Contains(t, approved[8], "customer called")
	last := rows[len(rows)-1]
	require.Equal(t, "status", last.Kind)
	require.Equal(t, []string{"succeeded", ref, "$25.00 USD"}, last.Cells[5:8], "the vendor's object and amount")
	var links int
	run("no op link", chromedp.Evaluate(`document.querySelectorAll('#audit a[href*="/console/lookup"]').length`, &links))
	require.Zero(t, links, "no link to a page the auditor may not open")
}
