package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromiumPath returns the Chromium to drive. It skips the test when none is installed,
// except in CI (CI set), where a missing browser fails it: .ci/run installs one.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium found (chromium, chromium-browser or google-chrome) and CI is set: install it (apt-get install -y chromium)")
	}
	t.Skip("no Chromium installed (apt-get install -y chromium); CI runs this test")
	return ""
}

// TestConsoleInChromium drives the web console in headless Chromium against a real
// `oncebox serve`, with real Postgres and the fake Stripe, as a person would: an agent
// token is refused at sign-in; an approver signs in, sees the waiting refund, approves
// it, finds it succeeded by its key, downloads the finance CSV (identical to
// `oncebox reconcile report --format csv`) and signs out; a form posted from another
// site is refused.
func TestConsoleInChromium(t *testing.T) {
	browserPath := chromiumPath(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := startConsoleServe(ctx, t)
	pool, agent, approver, fake, base, env := cs.pool, cs.agent, cs.approver, cs.fake, cs.base, cs.env
	record := func(key, body string) map[string]any { return cs.record(ctx, t, key, body) }

	var paid string
	for i, amount := range []int{5000, 1299, 24900} {
		op := record(fmt.Sprintf("order-100%d-pay", i+1), fmt.Sprintf(
			`{"tool":"stripe.payment_intent","args":{"amount":%d,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`, amount))
		require.Equal(t, "succeeded", op["status"], op)
		if i == 0 {
			paid = op["vendor_ref"].(string)
		}
	}
	const refundKey = "order-1001-refund"
	op := record(refundKey, `{"tool":"stripe.refund","args":{"payment_intent":"`+paid+`","amount":2500,"reason":"requested_by_customer"}}`)
	require.Equal(t, "awaiting_approval", op["status"], op)
	op = record("order-1003-refund", `{"tool":"stripe.refund","args":{"payment_intent":"`+paid+`","amount":2400}}`)
	require.Equal(t, "awaiting_approval", op["status"], op)
	cs.needsReview(ctx, t, "order-0998-pay")

	bctx := newChromium(ctx, t, browserPath)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		require.NoError(t, chromedp.Run(bctx, actions...), what)
	}
	signIn := func(token string) {
		run("sign in", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(`#token`, chromedp.ByQuery),
			chromedp.SendKeys(`#token`, token, chromedp.ByQuery), chromedp.Submit(`#token`, chromedp.ByQuery))
	}

	// An agent token cannot sign in.
	var text string
	signIn(agent)
	run("agent refused", chromedp.WaitVisible(`p.error[data-reason="forbidden"]`, chromedp.ByQuery),
		chromedp.Text(`p.error`, &text, chromedp.ByQuery))
	require.Contains(t, text, "role agent")

	// The approver signs in and lands on the overview.
	signIn(approver)
	run("overview", chromedp.WaitVisible(`svg.chart`, chromedp.ByQuery), chromedp.Text(`.cards`, &text, chromedp.ByQuery))
	text = strings.Join(strings.Fields(text), " ")
	require.Contains(t, text, "2 waiting for approval")
	require.Contains(t, text, "1 waiting for a person to review")

	// The waiting refund, with its amount and who asked; approve it with a reason.
	run("approvals", chromedp.Navigate(base+"/console/approvals"),
		chromedp.WaitVisible(`article[data-key="`+refundKey+`"]`, chromedp.ByQuery),
		chromedp.Text(`article[data-key="`+refundKey+`"]`, &text, chromedp.ByQuery))
	require.Contains(t, text, "$25.00 USD of a $50.00 USD payment, $0.00 USD refunded so far")
	require.Contains(t, text, "support-chat-4711")
	run("approve", chromedp.SendKeys(`article[data-key="`+refundKey+`"] input[name=reason]`, "customer called, order 1001 damaged", chromedp.ByQuery),
		chromedp.Click(`article[data-key="`+refundKey+`"] button.approve`, chromedp.ByQuery),
		chromedp.WaitVisible(`p.notice`, chromedp.ByQuery), chromedp.Text(`p.notice`, &text, chromedp.ByQuery))
	require.Contains(t, text, "Approved: the op "+refundKey)

	// Find it by its key: it succeeded, and the timeline says who approved it.
	require.Eventually(t, func() bool {
		run("lookup", chromedp.Navigate(base+"/console/lookup?q="+refundKey), chromedp.WaitVisible(`#op-status`, chromedp.ByQuery),
			chromedp.Text(`#op-status`, &text, chromedp.ByQuery))
		return text == "done"
	}, 30*time.Second, 300*time.Millisecond, "the approved refund succeeds")
	run("timeline", chromedp.Text(`.timeline`, &text, chromedp.ByQuery))
	require.Regexp(t, `approved it: now waiting to be sent \(reason: customer called, order 1001 damaged\) by approver token \d+`, text)
	require.Len(t, fake.Refunds(), 1, "the fake Stripe holds the one approved refund")

	run("review", chromedp.Navigate(base+"/console/review"), chromedp.WaitVisible(`article[data-key="order-0998-pay"]`, chromedp.ByQuery),
		chromedp.Text(`article[data-key="order-0998-pay"]`, &text, chromedp.ByQuery))
	require.Contains(t, text, "pi_3QxA2")

	// The finance report, and its CSV as the browser downloads it: the CLI's, byte for byte.
	since := time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	var href string
	var ok bool
	run("finance", chromedp.Navigate(base+"/console/finance?since="+since+"&until="+until), chromedp.WaitVisible(`#csv`, chromedp.ByQuery),
		chromedp.AttributeValue(`#csv`, "href", &href, &ok, chromedp.ByQuery))
	require.True(t, ok)
	downloads := t.TempDir()
	run("download csv", browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllow).WithDownloadPath(downloads),
		chromedp.Click(`#csv`, chromedp.ByQuery))
	var csv string
	require.Eventually(t, func() bool {
		files, _ := filepath.Glob(filepath.Join(downloads, "oncebox-report-*.csv"))
		if len(files) != 1 {
			return false
		}
		b, err := os.ReadFile(files[0])
		csv = string(b)
		return err == nil && strings.HasSuffix(csv, "\n")
	}, 20*time.Second, 100*time.Millisecond, "the browser downloads the CSV")
	require.Contains(t, href, "/console/finance.csv?")
	cli, stderr, _ := runCLI(t, "reconcile report --tenant acme --format csv --since "+since+" --until "+until, env...)
	require.NotEmpty(t, cli, stderr)
	require.Equal(t, cli, csv, "the console's CSV is the CLI's")
	require.Contains(t, csv, refundKey)

	// Sign out: the console's pages send to the sign-in form again.
	run("sign out", chromedp.Click(`form.signout button`, chromedp.ByQuery), chromedp.WaitVisible(`#token`, chromedp.ByQuery))
	var loc string
	run("signed out", chromedp.Navigate(base+"/console/approvals"), chromedp.WaitVisible(`#token`, chromedp.ByQuery), chromedp.Location(&loc))
	require.Contains(t, loc, "/console/signin")

	// A form posted from another site, even to a signed-in browser, is refused.
	signIn(approver)
	run("signed in again", chromedp.WaitVisible(`svg.chart`, chromedp.ByQuery))
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id="f" method="post" action="%s/console/approvals">
<input name="key" value="order-1003-refund"><input name="decision" value="approve"><input name="csrf" value="guess"></form>
<script>document.getElementById("f").submit()</script>`, base)
	}))
	t.Cleanup(evil.Close)
	var reason string
	run("cross-site post", chromedp.Navigate(strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)),
		chromedp.WaitVisible(`p.error`, chromedp.ByQuery), chromedp.AttributeValue(`p.error`, "data-reason", &reason, &ok, chromedp.ByQuery))
	require.Equal(t, "cross-origin", reason)
	var status string
	require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM oncebox_op WHERE idempotency_key = 'order-1003-refund'`).Scan(&status))
	require.Equal(t, "awaiting_approval", status, "the cross-site approval changed nothing")
	require.Len(t, fake.Refunds(), 1)
}
