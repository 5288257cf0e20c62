package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// statusOf returns the status the lookup page shows for key.
func (b *browser) statusOf(key string) string {
	b.t.Helper()
	_, page := b.get("/console/lookup?q=" + url.QueryEscape(key))
	m := regexp.MustCompile(`id="op-status" data-status="([a-z_]+)">`).FindStringSubmatch(page)
	require.NotNil(b.t, m, "the lookup shows the op %s: %s", key, page)
	return m[1]
}

// TestRejectNeedsAReasonAndAConfirmation: a rejection without a reason (or only
// spaces) is refused with 400 and a sentence; with a reason it first answers a
// confirmation page, plain HTML, that rejects nothing; only its button, which posts
// confirm=yes, rejects. Stripe holds no refund.
func TestRejectNeedsAReasonAndAConfirmation(t *testing.T) {
	t.Parallel()
	e := start(t)
	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	_, page = b.get("/console/approvals")
	csrf := csrfOf(t, page)
	reject := func(reason, confirm string) (*http.Response, string) {
		return b.post("/console/approvals", url.Values{"csrf": {csrf}, "key": {e.refundKey}, "decision": {"reject"},
			"reason": {reason}, "confirm": {confirm}})
	}

	for _, reason := range []string{"", "   "} {
		resp, page = reject(reason, "yes")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "reason %q", reason)
		require.Equal(t, "invalid-request", reasonOf(page))
		require.Contains(t, page, "A rejection needs a reason")
		require.Contains(t, page, `data-key="`+e.refundKey+`"`, "the queue is shown again under the refusal")
	}
	require.Equal(t, "awaiting_approval", b.statusOf(e.refundKey))

	resp, page = reject("the customer withdrew the request", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "Reject this op?")
	require.Contains(t, page, `class="decide confirm"`)
	require.Contains(t, page, `name="confirm" value="yes"`)
	require.Contains(t, page, `name="reason" value="the customer withdrew the request"`)
	require.NotContains(t, page, "<script", "the confirmation works without JavaScript")
	require.Equal(t, "awaiting_approval", b.statusOf(e.refundKey), "asking for the confirmation rejects nothing")

	resp, _ = reject("the customer withdrew the request", "yes")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = b.get(resp.Header.Get("Location"))
	require.Contains(t, page, "Rejected: the op "+e.refundKey)
	require.Equal(t, "rejected", b.statusOf(e.refundKey))
	_, page = b.get("/console/lookup?q=" + e.refundKey)
	require.Contains(t, page, "the customer withdrew the request", "the reason is in the op's timeline")
	require.Empty(t, e.stripe.Refunds())
}

// TestReviewCardShowsArguments: the review card shows the op's arguments as stored,
// as the approval card does; the sealed copy of redacted fields never reaches the page.
func TestReviewCardShowsArguments(t *testing.T) {
	t.Parallel()
	e := start(t)
	_, err := e.srv.Pool().Exec(context.Background(), `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, sealed_args,
		fingerprint, status, attempts, vendor_key, expires_at)
		VALUES ($1, 'order-0998-pay', 'stripe.payment_intent', 'stripe',
		'{"amount":1800,"currency":"eur","metadata":{"card_note":"redacted:hmac-3f9a"}}', 'sealed sk_live_do_not_show',
		'\x00', 'needs_review', 1, 'ob_review', now() + interval '1 day')`, e.tenant.ID)
	require.NoError(t, err)
	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	resp, page = b.get("/console/review")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	card := page[strings.Index(page, `data-key="order-0998-pay"`):]
	require.Contains(t, card, "Arguments (as stored; redacted fields stay redacted)")
	require.Contains(t, card, `&#34;amount&#34;: 1800`)
	require.Contains(t, card, `&#34;card_note&#34;: &#34;redacted:hmac-3f9a&#34;`)
	require.NotContains(t, page, "sk_live_do_not_show")
}

// replaysOn returns the replay count the overview shows.
func (b *browser) replaysOn() string {
	b.t.Helper()
	_, page := b.get("/console/overview")
	m := regexp.MustCompile(`<span class="n">([0-9—]+)</span> replays`).FindStringSubmatch(page)
	require.NotNil(b.t, m, "the overview shows replays: %s", page)
	return m[1]
}

// TestOverviewReplaysPerTenant: the overview counts the replays of the signed-in
// tenant only; another tenant's replays on the same server do not show.
func TestOverviewReplaysPerTenant(t *testing.T) {
	t.Parallel()
	e := start(t)
	_, otherAgent, err := e.srv.Tenants().Create(context.Background(), "other")
	require.NoError(t, err)
	other := *e
	other.agent = otherAgent
	const pay = `{"tool":"stripe.payment_intent","args":{"amount":700,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`
	for range 3 {
		op := other.api(t, "other-order-7", pay)
		require.Equal(t, "succeeded", op["status"], op)
	}
	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Equal(t, "0", b.replaysOn(), "the other tenant's two replays are not acme's")

	const own = `{"tool":"stripe.payment_intent","args":{"amount":5000,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`
	for range 2 {
		op := e.api(t, "acme-order-7", own)
		require.Equal(t, "succeeded", op["status"], op)
	}
	require.Equal(t, "1", b.replaysOn())
}

// TestEndedSessionSaysSo: a session that expired, or that the server no longer knows
// (its table emptied, as after a restart on a fresh database), sends its browser to the
// sign-in form with a notice in words and clears the dead cookie; a browser that never
// signed in gets the form without it.
func TestEndedSessionSaysSo(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, end := range []string{
		`UPDATE oncebox_console_session SET expires_at = now() - interval '1 second'`,
		`DELETE FROM oncebox_console_session`,
	} {
		b := newBrowser(t, e.base)
		resp, page := b.signIn(e.approver)
		require.Equal(t, http.StatusOK, resp.StatusCode, page)
		_, err := e.srv.Pool().Exec(context.Background(), end)
		require.NoError(t, err)

		resp, _ = b.get("/console/approvals")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, end)
		loc := resp.Header.Get("Location")
		require.Equal(t, "/console/signin?next=%2Fconsole%2Fapprovals&ended=1", loc, end)
		require.Contains(t, strings.Join(resp.Header.Values("Set-Cookie"), "\n"), "oncebox_console=; Path=/console/; Max-Age=0", "the dead cookie is cleared")
		_, page = b.get(loc)
		require.Contains(t, page, `<p class="notice" role="status">Your session ended`, end)
		require.Contains(t, page, "sign in again.")
		require.Contains(t, page, `name="next" value="/console/approvals"`)

		// The cookie is gone: the next page is a plain redirect, and so is /console/.
		resp, _ = b.get("/console/")
		require.Equal(t, "/console/signin", resp.Header.Get("Location"))
	}

	// /console/ with a dead cookie says so too.
	b := newBrowser(t, e.base)
	b.signIn(e.approver)
	_, err := e.srv.Pool().Exec(context.Background(), `DELETE FROM oncebox_console_session`)
	require.NoError(t, err)
	resp, _ := b.get("/console/")
	require.Equal(t, "/console/signin?ended=1", resp.Header.Get("Location"))

	fresh := newBrowser(t, e.base)
	resp, _ = fresh.get("/console/review")
	require.Equal(t, "/console/signin?next=%2Fconsole%2Freview", resp.Header.Get("Location"))
	_, page := fresh.get("/console/signin?next=%2Fconsole%2Freview")
	require.NotContains(t, page, `class="notice"`)
}
