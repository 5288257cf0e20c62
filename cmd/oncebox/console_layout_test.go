package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/doors/console"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendoraccount"
)

// screenshotsEnv, set to 1, makes TestConsoleFitsNarrowAndWideScreens write the
// screenshots of docs/console.md into docs/console/ (name-width.png).
const screenshotsEnv = "ONCEBOX_SCREENSHOTS"

// consoleServe is a running `oncebox serve` for the browser tests: its tenant acme, an
// agent and an approver token, the fake Stripe behind it and the environment it runs with.
type consoleServe struct {
	base     string
	pool     *pgxpool.Pool
	tenant   *tenant.Tenant
	tenants  *tenant.Store
	agent    string
	approver string
	fake     *fakestripe.Server
	env      []string
}

// startConsoleServe starts `oncebox serve` on a fresh schema, refunds above 1000 held
// for approval, and waits for its /healthz.
func startConsoleServe(ctx context.Context, t *testing.T) *consoleServe {
	t.Helper()
	pool := dbtest.Schema(t)
	store := tenant.NewStore(pool)
	tn, agent, err := store.Create(ctx, "acme")
	require.NoError(t, err)
	approver, err := store.NewTokenWithRole(ctx, "acme", tenant.RoleApprover)
	require.NoError(t, err)
	fake := fakestripe.New(fakestripe.Config{})
	stripeSrv := httptest.NewServer(fake)
	t.Cleanup(stripeSrv.Close)

	addr := freeAddr(t)
	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool), "ONCEBOX_LOG_LEVEL=error",
		"STRIPE_API_KEY=sk_test_oncebox", "STRIPE_API_BASE=" + stripeSrv.URL, "SENDGRID_API_KEY=", "ONCEBOX_WEBHOOK_TARGETS="}
	startChild(t, "serve", append(env, "ONCEBOX_ADDR="+addr, "ONCEBOX_REFUND_APPROVAL_ABOVE=1000")...)
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "oncebox serve did not answer /healthz")
	return &consoleServe{base: base, pool: pool, tenant: tn, tenants: store, agent: agent, approver: approver, fake: fake, env: env}
}

// record posts an op with the agent token, in the conversation support-chat-4711, and
// returns its JSON once settled (or held).
func (cs *consoleServe) record(ctx context.Context, t *testing.T, key, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, cs.base+"/v1/ops?wait=10s", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cs.agent)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Oncebox-Conversation-Id", "support-chat-4711")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var op map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&op))
	return op
}

// needsReview stores a payment in needs_review under key: one attempt that timed out,
// and a reconcile that found two PaymentIntents.
func (cs *consoleServe) needsReview(ctx context.Context, t *testing.T, key string) {
	t.Helper()
	var id string
	require.NoError(t, cs.pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, attempts, vendor_key, expires_at, created_at, updated_at)
		VALUES ($1, $2, 'stripe.payment_intent', 'stripe', '{"amount":1800,"currency":"eur","description":"order 0998"}', '\x00', 'needs_review', 1,
		'ob_review_' || $2, now() + interval '1 day', now() - interval '2 hours', now() - interval '90 minutes') RETURNING id::text`,
		cs.tenant.ID, key).Scan(&id))
	_, err := cs.pool.Exec(ctx, `INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at, finished_at, outcome, error)
		VALUES ($1, 1, gen_random_uuid(), 'ob_review', now() - interval '2 hours', now() - interval '2 hours' + interval '20 seconds', 'unknown', 'timeout: no answer within 20s')`, id)
	require.NoError(t, err)
	_, err = cs.pool.Exec(ctx, `INSERT INTO oncebox_op_event (op_id, at, kind, from_status, to_status, actor, detail)
		VALUES ($1, now() - interval '90 minutes', 'reconcile', 'unknown', 'needs_review', 'reconciler',
		'{"decision":"duplicate","found":["pi_3QxA1ZvKYlo2C0000000001","pi_3QxA2ZvKYlo2C0000000002"]}')`, id)
	require.NoError(t, err)
}

// newChromium starts a headless Chromium at 1280×900 for the test's lifetime.
func newChromium(ctx context.Context, t *testing.T, path string) context.Context {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900))...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	return bctx
}

// screenWidths are the widths every console page must fit: a phone and a laptop.
var screenWidths = []int64{390, 1280}

// fit is what fitScript measures on a page.
type fit struct {
	ScrollWidth int      `json:"scrollWidth"`
	InnerWidth  int      `json:"innerWidth"`
	Header      []string `json:"header"`
	Overlaps    []string `json:"overlaps"`
}

// fitScript measures the page's width against the window's, lists the header's
// elements that reach out of the header (or of their own box), and the approval cards
// whose amount overlaps the sentence under it.
const fitScript = `(() => {
  const out = {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth, header: [], overlaps: []};
  const header = document.querySelector('header');
  if (header) {
    const h = header.getBoundingClientRect();
    for (const el of header.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      const out1 = r.left < h.left - 0.5 || r.right > h.right + 0.5 || r.top < h.top - 0.5 || r.bottom > h.bottom + 0.5 ||
        r.right > window.innerWidth + 0.5 || el.scrollWidth > el.clientWidth + 1;
      if (out1) out.header.push(el.tagName.toLowerCase() + ' "' + el.textContent.trim().slice(0, 40) + '"');
    }
  }
  const meets = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  for (const card of document.querySelectorAll('article.op')) {
    const amount = card.querySelector('.amount'), why = card.querySelector('.why'), tool = card.querySelector('.tool');
    if (!amount) continue;
    for (const other of [why, tool]) {
      if (other && meets(amount.getBoundingClientRect(), other.getBoundingClientRect())) out.overlaps.push(card.dataset.key);
    }
  }
  return out;
})()`

// consoleLinks lists the console pages the current page links to from its navigation
// and its content: not the static files, not downloads.
const consoleLinks = `Array.from(document.querySelectorAll('header a[href], main a[href]'))
  .filter(a => !a.hasAttribute('download'))
  .map(a => a.getAttribute('href'))
  .filter(h => h.startsWith('/console/') && !h.startsWith('/console/static/') && !h.includes('.csv'))`

// pageKey names a console page by its path and the names of its query parameters, so
// that a lookup of one key stands for the lookups of all.
func pageKey(href string) string {
	u, err := url.Parse(href)
	if err != nil {
		return href
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range u.Query() {
			if !yield(k) {
				return
			}
		}
	})
	return u.Path + "?" + strings.Join(names, "&")
}

// layoutChecker checks pages in one browser tab at every width in screenWidths.
type layoutChecker struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

func (lc *layoutChecker) run(what string, actions ...chromedp.Action) {
	lc.t.Helper()
	require.NoError(lc.t, chromedp.Run(lc.ctx, actions...), what)
}

// check measures the page the tab shows at each width; with shot set and screenshots
// on, it saves one per width as docs/console/<shot>-<width>.png.
func (lc *layoutChecker) check(name, shot string) {
	lc.t.Helper()
	for _, w := range screenWidths {
		lc.run("resize", emulation.SetDeviceMetricsOverride(w, 900, 1, false))
		var f fit
		lc.run("measure "+name, chromedp.Evaluate(fitScript, &f))
		require.Equal(lc.t, int(w), f.InnerWidth, name)
		require.LessOrEqual(lc.t, f.ScrollWidth, f.InnerWidth, "%s at %d px is %d px wide: something does not reflow", name, w, f.ScrollWidth)
		require.Empty(lc.t, f.Header, "%s at %d px: these header elements spill out of the header", name, w)
		require.Empty(lc.t, f.Overlaps, "%s at %d px: on these approval cards the amount overlaps the text", name, w)
		lc.checkContent(name, w)
		if shot != "" && lc.shots != "" {
			var png []byte
			lc.run("screenshot "+name, chromedp.FullScreenshot(&png, 100))
			require.NoError(lc.t, os.WriteFile(filepath.Join(lc.shots, fmt.Sprintf("%s-%d.png", shot, w)), png, 0o644))
		}
	}
	lc.run("reset size", emulation.ClearDeviceMetricsOverride())
}

// crawl visits start, every console page it links to, and every page those link to in
// turn (one page per path and query names), checking each; it returns the keys of the
// pages visited.
func (lc *layoutChecker) crawl(base, start string) []string {
	lc.t.Helper()
	queue, seen := []string{start}, map[string]bool{pageKey(start): true}
	for len(queue) > 0 {
		href := queue[0]
		queue = queue[1:]
		var links []string
		lc.run("visit "+href, chromedp.Navigate(base+href), chromedp.WaitReady("main", chromedp.ByQuery),
			chromedp.Evaluate(consoleLinks, &links))
		lc.check(href, "")
		for _, l := range links {
			if k := pageKey(l); !seen[k] {
				seen[k] = true
				queue = append(queue, l)
			}
		}
		require.Less(lc.t, len(seen), 50, "the crawl found more pages than a console has: %v", seen)
	}
	return slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
}

// reviewKey is the key of the op seedLayout puts in needs_review.
const reviewKey = "customer-4711-subscription-2025-annual-renewal-payment-0998-retry"

// seedLayout records what fills every console page: paid orders and refunds waiting
// for approval under long keys, an op in needs_review with a long error text, and so
// finance lines with long ids. It returns the key of one refund.
func (cs *consoleServe) seedLayout(ctx context.Context, t *testing.T) string {
	t.Helper()
	var paid string
	for i, amount := range []int{5000, 1299, 24900} {
		op := cs.record(ctx, t, fmt.Sprintf("customer-4711-subscription-2025-annual-renewal-payment-%04d", i+1), fmt.Sprintf(
			`{"tool":"stripe.payment_intent","args":{"amount":%d,"currency":"usd","payment_method":"pm_card_visa","confirm":true,"description":"annual renewal, order %d"}}`, amount, 1001+i))
		require.Equal(t, "succeeded", op["status"], op)
		paid = op["vendor_ref"].(string)
	}
	refund := "customer-4711-subscription-2025-annual-renewal-refund-0001"
	for _, key := range []string{refund, "customer-4711-subscription-2025-annual-renewal-refund-0002"} {
		op := cs.record(ctx, t, key, `{"tool":"stripe.refund","args":{"payment_intent":"`+paid+`","amount":24900,"reason":"requested_by_customer"}}`)
		require.Equal(t, "awaiting_approval", op["status"], op)
	}
	cs.needsReview(ctx, t, reviewKey)
	_, err := cs.pool.Exec(ctx, `INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at, finished_at, outcome, error)
		SELECT id, 2, gen_random_uuid(), 'ob_review', now() - interval '100 minutes', now() - interval '100 minutes', 'unknown',
			'permission_error: the API key does not have access to the account acct_1Nv0FGQ9RKHgCVdKacmeSubscriptionsEurope (or that account does not exist); the connection was reset before an answer came back'
		FROM oncebox_op WHERE idempotency_key = $1`, reviewKey)
	require.NoError(t, err)
	return refund
}

// TestConsoleFitsNarrowAndWideScreens: every console page, found from the links the
// pages show (so a page added to the navigation is checked without naming it here),
// plus the pages reached by a form (the rejection's confirmation), a lookup with
// several results, the sign-in, link and error pages, fits a 390 px phone and a
// 1280 px laptop: no horizontal scroll, no header element out of the header, no
// amount over an approval card's text; then, signed in as an admin, the admins' pages
// (Budgets, Vendors) too. With ONCEBOX_SCREENSHOTS=1 it writes the
// screenshots of docs/console.md.
func TestConsoleFitsNarrowAndWideScreens(t *testing.T) {
	browserPath := chromiumPath(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := startConsoleServe(ctx, t)
	refund := cs.seedLayout(ctx, t)
	lc := &layoutChecker{t: t, ctx: newChromium(ctx, t, browserPath)}
	if os.Getenv(screenshotsEnv) == "1" {
		lc.shots = filepath.Join("..", "..", "docs", "console")
		require.NoError(t, os.MkdirAll(lc.shots, 0o755))
	}

	lc.run("sign-in page", chromedp.Navigate(cs.base+"/console/signin"), chromedp.WaitVisible(`#token`, chromedp.ByQuery))
	lc.check("sign-in", "signin")
	lc.run("sign in", chromedp.SendKeys(`#token`, cs.approver, chromedp.ByQuery), chromedp.Submit(`#token`, chromedp.ByQuery),
		chromedp.WaitVisible(`header nav`, chromedp.ByQuery))

	visited := lc.crawl(cs.base, "/console/overview")
	for _, want := range []string{"/console/overview?", "/console/approvals?", "/console/review?", "/console/lookup?",
		"/console/lookup?q", "/console/finance?"} {
		require.Contains(t, visited, want, "the crawl reaches %s", want)
	}

	for name, path := range map[string]string{"overview": "/console/overview", "approvals": "/console/approvals",
		"review": "/console/review", "finance": "/console/finance", "lookup": "/console/lookup?q=" + url.QueryEscape(refund)} {
		lc.run(name, chromedp.Navigate(cs.base+path), chromedp.WaitReady("main", chromedp.ByQuery))
		lc.check(name, name)
	}
	lc.run("lookup, several results", chromedp.Navigate(cs.base+"/console/lookup?q=support-chat-4711"), chromedp.WaitVisible(`main table`, chromedp.ByQuery))
	lc.check("lookup, several results", "")
	lc.run("lookup, needs_review", chromedp.Navigate(cs.base+"/console/lookup?q="+reviewKey), chromedp.WaitVisible(`.timeline`, chromedp.ByQuery))
	lc.check("lookup, needs_review", "")
	lc.run("error page", chromedp.Navigate(cs.base+"/console/no-such-page"), chromedp.WaitVisible(`p.error`, chromedp.ByQuery))
	lc.check("error page", "")

	// Rejecting asks for a confirmation, on a page of its own.
	card := `article[data-key="` + refund + `"]`
	lc.run("reject", chromedp.Navigate(cs.base+"/console/approvals"), chromedp.WaitVisible(card, chromedp.ByQuery),
		chromedp.SendKeys(card+` input[name=reason]`, "duplicate of the refund made by phone on 2025-03-02", chromedp.ByQuery),
		chromedp.Click(card+` button.reject`, chromedp.ByQuery), chromedp.WaitVisible(`form.confirm`, chromedp.ByQuery))
	lc.check("rejection's confirmation", "reject-confirm")
	var text string
	lc.run("confirm", chromedp.Click(`form.confirm button.reject`, chromedp.ByQuery), chromedp.WaitVisible(`p.notice`, chromedp.ByQuery),
		chromedp.Text(`p.notice`, &text, chromedp.ByQuery))
	require.Contains(t, text, "Rejected: the op "+refund)

	lc.run("sign out", chromedp.Click(`form.signout button`, chromedp.ByQuery), chromedp.WaitVisible(`#token`, chromedp.ByQuery))
	lc.check("sign-in after sign-out", "")
	link, err := console.SignInLink(ctx, cs.pool, cs.tenants, cs.approver, time.Minute)
	require.NoError(t, err)
	lc.run("link page", chromedp.Navigate(cs.base+link), chromedp.WaitVisible(`main form button`, chromedp.ByQuery))
	lc.check("link page", "")
	lc.run("signed-out error page", chromedp.Navigate(cs.base+"/console/link"), chromedp.WaitVisible(`p.error`, chromedp.ByQuery))
	lc.check("signed-out error page", "")
	lc.checkAdminPages(ctx, cs)
}

// checkAdminPages signs in with an admin token and crawls again, from the Vendors
// page (the tenant with a long Connect account id) with two budgets set (one per
// conversation, in two currencies): the admins' pages, linked from their navigation
// only, fit too, and so does the Audit page (the admins' and auditors').
func (lc *layoutChecker) checkAdminPages(ctx context.Context, cs *consoleServe) {
	lc.t.Helper()
	settings, err := vendoraccount.New(cs.pool, nil)
	require.NoError(lc.t, err)
	require.NoError(lc.t, settings.Set(ctx, vendoraccount.SetParams{TenantID: cs.tenant.ID, Vendor: "stripe",
		Account: "acct_1Nv0FGQ9RKHgCVdKacmeSubscriptionsEurope", By: "cli:alice@example.com"}))
	for _, args := range []string{
		"tenant budget set --tenant acme customer-refunds-per-conversation --window 24h --count 3 --amount usd=250000 --amount eur=90000 --tool stripe.refund --scope conversation --conversations 20",
		"tenant budget set --tenant acme payments-per-day --window 24h --count 1000 --amount usd=5000000 --tool stripe.payment_intent",
	} {
		out, stderr, code := runCLI(lc.t, args, cs.env...)
		require.Zero(lc.t, code, out+stderr)
	}
	admin, err := cs.tenants.NewTokenWithRole(ctx, "acme", tenant.RoleAdmin)
	require.NoError(lc.t, err)
	lc.run("sign in as admin", chromedp.Navigate(cs.base+"/console/signin"), chromedp.WaitVisible(`#token`, chromedp.ByQuery),
		chromedp.SendKeys(`#token`, admin, chromedp.ByQuery), chromedp.Submit(`#token`, chromedp.ByQuery),
		chromedp.WaitVisible(`header nav`, chromedp.ByQuery))
	visited := lc.crawl(cs.base, "/console/vendors")
	for _, want := range []string{"/console/budgets?", "/console/vendors?", "/console/audit?"} {
		require.Contains(lc.t, visited, want, "the admin's crawl reaches %s", want)
	}
	for _, page := range []string{"budgets", "vendors", "audit"} {
		lc.run(page, chromedp.Navigate(cs.base+"/console/"+page), chromedp.WaitVisible(`main table`, chromedp.ByQuery))
		lc.check(page, page)
	}
}
