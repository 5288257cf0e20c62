package finance_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
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
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/stripe"
)

// TestARefusedAccountLeavesTheReportStanding: tenant x is set on a Connect account the
// platform does not reach (acct_x); its charge fails after one request (Stripe's 403
// does not change by waiting), and the finance report on every tenant still stands:
// tenant a's payment matches and is totalled, x's ops are unchecked lines with a
// sentence that says what to do, and the account is named in Unavailable.
func TestARefusedAccountLeavesTheReportStanding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := fakestripe.New(fakestripe.Config{})
	fake.AddAccount("acct_A")
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	v, err := stripe.New(stripe.Config{APIKey: "sk_test_finance", BaseURL: srv.URL, Timeout: 2 * time.Second})
	require.NoError(t, err)
	pool := dbtest.Schema(t)
	ob := optest.NewOutbox(t, pool, tools.Config{}, v)
	optest.Start(t, ob)
	a, x := optest.Tenant(t, pool, "a"), optest.Tenant(t, pool, "x")
	for id, acct := range map[int64]string{a: "acct_A", x: "acct_x"} {
		require.NoError(t, ob.VendorSettings().Set(ctx, vendoraccount.SetParams{TenantID: id, Vendor: "stripe", Account: acct, By: "test"}))
	}
	since := time.Now().Add(-time.Minute)
	opA := optest.Enqueue(t, ob, a, "pay-a", protocol.ToolPaymentIntent, map[string]any{"amount": 1000, "currency": "usd"})
	opX := optest.Enqueue(t, ob, x, "pay-x", protocol.ToolPaymentIntent, map[string]any{"amount": 2000, "currency": "usd"})
	optest.WaitStatus(t, pool, ob, a, opA.ID, protocol.StatusSucceeded)
	failed := optest.WaitStatus(t, pool, ob, x, opX.ID, protocol.StatusFailed)
	optest.WaitJobsFinished(t, pool, opX.ID)
	require.Equal(t, 1, failed.Attempts, "a 403 is not retried")
	require.Contains(t, string(failed.Error), "not connected to this installation's platform")
	// The setting is deleted afterwards: the op still records the account.
	_, err = ob.VendorSettings().Delete(ctx, x, "stripe")
	require.NoError(t, err)

	rep, err := finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: time.Now().Add(time.Minute),
		Listers: map[string]finance.Lister{"stripe": v}, Accounts: ob.VendorSettings().Account})
	require.NoError(t, err, "one refused account does not take the report down")
	byOp := map[string]finance.Line{}
	for _, l := range rep.Lines {
		byOp[l.OpID] = l
	}
	require.Equal(t, finance.CategoryMatched, byOp[opA.ID].Category, "%+v", rep.Lines)
	lx := byOp[opX.ID]
	require.Equal(t, finance.CategoryUnchecked, lx.Category, "%+v", rep.Lines)
	require.Contains(t, lx.Detail, "Stripe refused to list Stripe account acct_x")
	require.Contains(t, lx.Detail, "Waiting will not help")
	require.Equal(t, []finance.Total{{Tool: protocol.ToolPaymentIntent, Currency: "usd", Count: 1, Amount: 1000}}, rep.Totals)
	require.Len(t, rep.Unavailable, 1)
	require.Equal(t, "acct_x", rep.Unavailable[0].Account)
	require.True(t, rep.Unavailable[0].Refused)
	require.Equal(t, map[string]int{"stripe": 1}, rep.Unchecked)
	require.False(t, rep.Clean())
	var buf bytes.Buffer
	require.NoError(t, rep.WriteJSON(&buf))
	require.Contains(t, buf.String(), `"unavailable"`)
	require.NotContains(t, buf.String(), "sk_test_finance")
}

// TestAVendorDownLeavesTheReportStanding: SendGrid cannot be listed (down); its mail
// is an unchecked line saying to try again later, and Stripe's payment still matches.
func TestAVendorDownLeavesTheReportStanding(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	ten := optest.Tenant(t, pool, "one")
	since := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	pay := seedOp(t, pool, ten, "pay", protocol.ToolPaymentIntent, "stripe", "succeeded", `{"amount":1000,"currency":"eur"}`, since.Add(time.Hour))
	mail := seedOp(t, pool, ten, "mail", "sendgrid.mail", "sendgrid", "succeeded", `{"to":[{"email":"sha256:ab"}]}`, since.Add(time.Hour))
	rep, err := finance.BuildReport(context.Background(), pool, finance.ReportParams{Since: since, Until: since.Add(24 * time.Hour),
		Listers: map[string]finance.Lister{
			"stripe": finance.ListerFunc(func(context.Context, time.Time, time.Time) ([]vendorapi.VendorObject, error) {
				return []vendorapi.VendorObject{{ID: "pi_1", OpID: pay, Amount: 1000, Currency: "eur", Created: since.Add(time.Hour)}}, nil
			}),
			"sendgrid": finance.ListerFunc(func(context.Context, time.Time, time.Time) ([]vendorapi.VendorObject, error) {
				return nil, errors.New("sendgrid: dial tcp: connection refused")
			}),
		}})
	require.NoError(t, err)
	require.Len(t, rep.Lines, 2)
	for _, l := range rep.Lines {
		switch l.OpID {
		case pay:
			require.Equal(t, finance.CategoryMatched, l.Category)
		case mail:
			require.Equal(t, finance.CategoryUnchecked, l.Category)
			require.Contains(t, l.Detail, "usually temporary: run the report again later")
		}
	}
	require.Equal(t, []finance.Net{{Currency: "eur", Paid: 1000, Net: 1000}}, rep.Nets)
	require.Len(t, rep.Unavailable, 1)
	require.False(t, rep.Unavailable[0].Refused)
	require.Contains(t, rep.Unavailable[0].Error, "connection refused")
}
