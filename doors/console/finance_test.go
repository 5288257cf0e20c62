package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFinanceStandsWithARefusedAccount: an op of the tenant was sent to a Stripe
// Connect account Stripe refuses (acct_x). The finance page still answers 200: the
// payment matches and shows in the paid / refunded / net summary, the op on acct_x is
// an unchecked line, and the page says in a sentence what could not be checked and
// what to do. The window says its end is not included.
func TestFinanceStandsWithARefusedAccount(t *testing.T) {
	t.Parallel()
	e := start(t)
	_, err := e.pool.Exec(context.Background(), `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, vendor_key, vendor_ref, vendor_account, expires_at, created_at)
		VALUES ($1, 'pay-on-x', 'stripe.payment_intent', 'stripe', '{"amount":2000,"currency":"usd"}', '\x00', 'succeeded',
		'ob_x', 'pi_on_x', 'acct_x', now() + interval '1 day', now() - interval '1 minute')`, e.tenant.ID)
	require.NoError(t, err)
	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)

	since, until := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	q := "?since=" + url.QueryEscape(since) + "&until=" + url.QueryEscape(until)
	resp, page = b.get("/console/finance" + q)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, "1 line(s) do not match the vendors, of which 1 could not be checked.")
	require.Contains(t, page, "Not checked: Stripe refused to list Stripe account acct_x")
	require.Regexp(t, strings.ReplaceAll(`pay-on-x</a></td><td>stripe.payment_intent</td><td>succeeded</td><td></td><td>\$20\.00 USD</td><td></td><td>Not checked: Stripe refused`, "<td>", cellTag), page)
	require.Regexp(t, strings.ReplaceAll(`<table class="nets" id="nets"[^>]*>[\s\S]*<tr data-currency="usd"[^>]*><td>\$290\.00 USD</td><td>\$0\.00 USD</td><td>\$290\.00 USD</td>`, "<td>", cellTag), page,
		"paid, refunded and net per currency")
	require.Contains(t, page, "up to (not included)")
	require.Regexp(t, regexp.QuoteMeta(until)+`, not included`, page)
	resp, csv := b.get("/console/finance.csv" + q)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, csv, "unchecked,")
}

// TestFinanceEmptyWindowSaysSo: a window without any op says there was nothing to
// compare, not that everything matched.
func TestFinanceEmptyWindowSaysSo(t *testing.T) {
	t.Parallel()
	e := start(t)
	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	day := time.Now().UTC().AddDate(0, 0, -3).Format("2006-01-02")
	next := time.Now().UTC().AddDate(0, 0, -2).Format("2006-01-02")
	resp, page = b.get("/console/finance?since=" + day + "&until=" + next)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, "Nothing to compare in this window")
	require.NotContains(t, page, "Every op of the window matches the vendors.")
}
