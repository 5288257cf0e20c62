package finance_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/finance"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendoraccount"
	"github.com/oncebox/oncebox/vendors/stripe"
)

// accountHeaders records the Stripe-Account header of every list request.
type accountHeaders struct {
	next http.Handler
	mu   sync.Mutex
	seen []string
}

func (h *accountHeaders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		h.mu.Lock()
		h.seen = append(h.seen, r.Header.Get("Stripe-Account"))
		h.mu.Unlock()
	}
	h.next.ServeHTTP(w, r)
}

// TestATenantsReportListsOnlyItsAccount: tenants A and B charge on their Connect
// accounts; A's report lists acct_A only and finds its op's payment there, clean; the
// report on every tenant lists both accounts and the platform's.
func TestATenantsReportListsOnlyItsAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := fakestripe.New(fakestripe.Config{})
	fake.AddAccount("acct_A")
	fake.AddAccount("acct_B")
	rec := &accountHeaders{next: fake}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	v, err := stripe.New(stripe.Config{APIKey: "sk_test_finance", BaseURL: srv.URL, Timeout: 2 * time.Second})
	require.NoError(t, err)
	pool := dbtest.Schema(t)
	ob := optest.NewOutbox(t, pool, tools.Config{}, v)
	optest.Start(t, ob)
	a, b := optest.Tenant(t, pool, "a"), optest.Tenant(t, pool, "b")
	for id, acct := range map[int64]string{a: "acct_A", b: "acct_B"} {
		require.NoError(t, ob.VendorSettings().Set(ctx, vendoraccount.SetParams{TenantID: id, Vendor: "stripe", Account: acct, By: "test"}))
	}
	since := time.Now().Add(-time.Minute)
	opA := optest.Enqueue(t, ob, a, "pay-a", protocol.ToolPaymentIntent, map[string]any{"amount": 1000, "currency": "usd"})
	opB := optest.Enqueue(t, ob, b, "pay-b", protocol.ToolPaymentIntent, map[string]any{"amount": 2000, "currency": "usd"})
	optest.WaitStatus(t, pool, ob, a, opA.ID, protocol.StatusSucceeded)
	optest.WaitStatus(t, pool, ob, b, opB.ID, protocol.StatusSucceeded)

	report := func(tenant int64) *finance.Report {
		rec.mu.Lock()
		rec.seen = nil
		rec.mu.Unlock()
		rep, err := finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: time.Now().Add(time.Minute), TenantID: tenant,
			Listers: map[string]finance.Lister{"stripe": v}, Accounts: ob.VendorSettings().Account})
		require.NoError(t, err)
		return rep
	}
	rep := report(a)
	require.Len(t, rep.Lines, 1, "%+v", rep.Lines)
	require.Equal(t, finance.CategoryMatched, rep.Lines[0].Category, "A's op matches its payment on acct_A")
	require.Equal(t, opA.ID, rep.Lines[0].OpID)
	require.Equal(t, []string{"acct_A", "acct_A"}, rec.seen, "payment intents and refunds, of acct_A only")
	require.Len(t, rep.Totals, 1)
	require.Equal(t, int64(1000), rep.Totals[0].Amount)

	rep = report(0)
	require.Len(t, rep.Lines, 2, "%+v", rep.Lines)
	for _, l := range rep.Lines {
		require.Equal(t, finance.CategoryMatched, l.Category)
	}
	require.ElementsMatch(t, []string{"", "", "acct_A", "acct_A", "acct_B", "acct_B"}, rec.seen)
}
