package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"
)

// lookupUnavailable stores a payment in needs_review under key: one attempt without a
// clear answer, and a reconcile that could not ask Stripe.
func (cs *consoleServe) lookupUnavailable(ctx context.Context, t *testing.T, key string) {
	t.Helper()
	var id string
	require.NoError(t, cs.pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, attempts, vendor_key, expires_at, created_at, updated_at)
		VALUES ($1, $2, 'stripe.payment_intent', 'stripe', '{"amount":4200,"currency":"eur"}', '\x00', 'needs_review', 1,
		'ob_unavailable_' || $2, now() + interval '1 day', now() - interval '2 hours', now() - interval '1 hour') RETURNING id::text`,
		cs.tenant.ID, key).Scan(&id))
	_, err := cs.pool.Exec(ctx, `INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at, finished_at, outcome, error)
		VALUES ($1, 1, gen_random_uuid(), 'ob_x', now() - interval '2 hours', now() - interval '2 hours' + interval '20 seconds', 'unknown', 'timeout: no answer within 20s')`, id)
	require.NoError(t, err)
	_, err = cs.pool.Exec(ctx, `INSERT INTO oncebox_op_event (op_id, at, kind, from_status, to_status, actor, detail)
		VALUES ($1, now() - interval '1 hour', 'reconcile', 'unknown', 'needs_review', 'reconciler',
		'{"decision":"lookup_unavailable","error":"stripe: search is not available on this account"}')`, id)
	require.NoError(t, err)
}

// supportCheck is what supportScript reads of a console page.
type supportCheck struct {
	// Visible maps a selector to its element's visible text ("" when it is absent or
	// hidden).
	Visible map[string]string `json:"visible"`
	// WordsBeforeJSON reports whether every Review item's headline and explanation
	// come before its first JSON, and no JSON shows unless asked for.
	WordsBeforeJSON bool `json:"wordsBeforeJSON"`
}

// supportScript reads, for the selectors in window.__sel, their visible text, and
// checks the Review items' order.
const supportScript = `(() => {
  const vis = el => el && el.offsetParent !== null && el.getClientRects().length > 0 ? el.innerText.trim().replace(/\s+/g, ' ') : '';
  const out = {visible: {}, wordsBeforeJSON: true};
  for (const s of window.__sel) out.visible[s] = vis(document.querySelector(s));
  for (const card of document.querySelectorAll('article.op')) {
    const words = card.querySelector('dl.explain'), head = card.querySelector('.headline');
    if (!words || !head) { out.wordsBeforeJSON = false; continue; }
    for (const json of card.querySelectorAll('code.detail')) {
      if (words.compareDocumentPosition(json) & Node.DOCUMENT_POSITION_PRECEDING) out.wordsBeforeJSON = false;
      if (vis(json) !== '') out.wordsBeforeJSON = false;
    }
  }
  return out;
})()`

// TestConsoleSpeaksToSupportInChromium drives the console in headless Chromium, at
// 390 and 1280 px, as a support person answering "was I refunded twice?": the
// lookup of a payment shows its amount and every refund asked for of it (by its
// PaymentIntent or its charge), a ch_… finds the payment, a refund shows its amount
// against the payment and its arguments; a Review item says what is known, what is
// not and what to check before any JSON; the asker and the approver are named once,
// by person where their token has one; the timeline speaks in words, not status codes.
func TestConsoleSpeaksToSupportInChromium(t *testing.T) {
	browserPath := chromiumPath(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := startConsoleServe(ctx, t)
	pi, ch := refundedTwice(ctx, t, cs)
	cs.lookupUnavailable(ctx, t, "order-0999-pay")
	alice, err := cs.tenants.NewTokenFor(ctx, "acme", tenant.RoleApprover, "alice@example.com")
	require.NoError(t, err)

	bctx := newChromium(ctx, t, browserPath)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		require.NoError(t, chromedp.Run(bctx, actions...), what)
	}
	read := func(path string, sel ...string) supportCheck {
		t.Helper()
		var c supportCheck
		run("read "+path, chromedp.Navigate(cs.base+path), chromedp.WaitReady("main", chromedp.ByQuery),
			chromedp.Evaluate(fmt.Sprintf("window.__sel = %s", jsList(sel)), nil), chromedp.Evaluate(supportScript, &c))
		return c
	}
	run("sign in", chromedp.Navigate(cs.base+"/console/signin"), chromedp.WaitVisible(`#token`, chromedp.ByQuery),
		chromedp.SendKeys(`#token`, alice, chromedp.ByQuery), chromedp.Submit(`#token`, chromedp.ByQuery),
		chromedp.WaitVisible(`header nav`, chromedp.ByQuery))

	// The waiting refund names who asked, by token; alice approves it.
	c := read("/console/approvals", `article[data-key="order-2001-refund-c"] dl`)
	require.Regexp(t, `Asked by agent token \d+`, c.Visible[`article[data-key="order-2001-refund-c"] dl`])
	card := `article[data-key="order-2001-refund-c"]`
	run("approve", chromedp.SendKeys(card+` input[name=reason]`, "customer called", chromedp.ByQuery),
		chromedp.Click(card+` button.approve`, chromedp.ByQuery), chromedp.WaitVisible(`p.notice`, chromedp.ByQuery))
	require.Eventually(t, func() bool {
		return read("/console/lookup?q=order-2001-refund-c", "#op-status").Visible["#op-status"] == "done"
	}, 30*time.Second, 300*time.Millisecond, "the approved refund is done")

	for _, w := range screenWidths {
		run("resize", emulation.SetDeviceMetricsOverride(w, 900, 1, false))
		for _, term := range []string{pi, ch} {
			c := read("/console/lookup?q="+term, `article.op[data-key="order-2001-pay"] h2`, "#op-amount", "#op-related", "#refund-summary")
			require.NotEmpty(t, c.Visible[`article.op[data-key="order-2001-pay"] h2`], "%d px: %s finds the payment", w, term)
			require.Equal(t, "$50.00 USD", c.Visible["#op-amount"], "%d px", w)
			for _, key := range []string{"order-2001-refund-a", "order-2001-refund-b", "order-2001-refund-c"} {
				require.Contains(t, c.Visible["#op-related"], key, "%d px: the lookup of %s lists the refund", w, term)
			}
			require.Equal(t, "3 refunds were asked for of this payment; 3 done.", c.Visible["#refund-summary"], "%d px", w)
		}
		c := read("/console/lookup?q=order-2001-refund-b", "#op-amount", "#op-args", "#op-related")
		require.Equal(t, "$3.00 USD of a $50.00 USD payment, $33.00 USD refunded so far", c.Visible["#op-amount"], "%d px", w)
		require.Contains(t, c.Visible["#op-args"], `"charge":"`+ch+`"`, "%d px: a refund's arguments show", w)
		require.Contains(t, c.Visible["#op-related"], "order-2001-pay", "%d px: a refund links to its payment", w)

		// The approval is told once, by the person.
		c = read("/console/lookup?q=order-2001-refund-c", ".timeline")
		tl := c.Visible[".timeline"]
		require.Equal(t, 1, strings.Count(tl, "alice@example.com"), "%d px: the approver is named once: %s", w, tl)
		require.Contains(t, tl, "approved it: now waiting to be sent (reason: customer called) by alice@example.com (approver)", "%d px", w)
		for _, code := range []string{"→", "claimed", "permanent", "acme token", "pending"} {
			require.NotContains(t, tl, code, "%d px: the timeline speaks in words", w)
		}

		sel := `article[data-key="order-0999-pay"] .headline`
		c = read("/console/review", sel, `article[data-key="order-0999-pay"] dl.explain`)
		require.Equal(t, "We don't know whether this charge happened", c.Visible[sel], "%d px", w)
		explain := c.Visible[`article[data-key="order-0999-pay"] dl.explain`]
		for _, want := range []string{"What we know", "What we don't know", "What to check", "Search Stripe for the idempotency key ob_unavailable_order-0999-pay"} {
			require.Contains(t, explain, want, "%d px", w)
		}
		require.True(t, c.WordsBeforeJSON, "%d px: every Review item says what is known before any JSON, and shows no JSON unasked", w)
	}
	run("reset size", emulation.ClearDeviceMetricsOverride())
}

// jsList writes strings as a JavaScript array literal.
func jsList(ss []string) string {
	quoted := make([]string, 0, len(ss))
	for _, s := range ss {
		quoted = append(quoted, fmt.Sprintf("%q", s))
	}
	return "[" + strings.Join(quoted, ",") + "]"
}
