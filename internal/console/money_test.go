package console_test

import (
	"net/http"
	"testing"

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
