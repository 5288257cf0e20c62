package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRefundWaitsWithItsAmountAsMoney: the sentence saying why a refund waits writes
// its amount in its payment's currency, as the card's amount is.
func TestRefundWaitsWithItsAmountAsMoney(t *testing.T) {
	t.Parallel()
	e := start(t)
	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	_, page = b.get("/console/approvals")
	require.Contains(t, page, "A stripe.refund of $25.00 USD is above the approval threshold of $10.00 USD.")
	require.NotContains(t, page, "currency unknown")
}

// TestFinanceShowsAFullRefundAgainstItsPayment: a refund whose args name no amount is
// shown on the finance page as the full refund of its payment, in money, rather than
// a blank op amount.
func TestFinanceShowsAFullRefundAgainstItsPayment(t *testing.T) {
	t.Parallel()
	e := start(t)
	pay := e.api(t, "pay-order-1001", `{"tool":"stripe.payment_intent","args":{"amount":29000,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`)
	full := e.api(t, "refund-full-1001", `{"tool":"stripe.refund","args":{"payment_intent":"`+pay["vendor_ref"].(string)+`"}}`)
	require.Equal(t, "awaiting_approval", full["status"], full)

	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	_, page = b.get("/console/approvals")
	resp, _ = b.post("/console/approvals", url.Values{"csrf": {csrfOf(t, page)}, "key": {"refund-full-1001"},
		"decision": {"approve"}, "reason": {"order cancelled"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Eventually(t, func() bool {
		_, page = b.get("/console/lookup?q=refund-full-1001")
		return strings.Contains(page, `id="op-status" data-status="succeeded">`)
	}, 20*time.Second, 100*time.Millisecond, "the approved refund succeeds")

	since, until := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	_, page = b.get("/console/finance?since=" + url.QueryEscape(since) + "&until=" + url.QueryEscape(until))
	require.Regexp(t, strings.ReplaceAll(`refund-full-1001</a></td><td>stripe.refund</td><td>succeeded</td><td>re_\w+</td>`+
		`<td>full refund of a \$290\.00 USD payment</td><td>\$290\.00 USD</td>`, "<td>", cellTag), page)
}
