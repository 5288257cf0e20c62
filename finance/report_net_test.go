package finance_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/finance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

// paymentReportEnv is a schema with a tenant, an outbox of the built-in tools, and the
// tenant's payment op "pay" of $290.00 USD made at 01:00 on 2025-01-01 as pi_1.
func paymentReportEnv(t *testing.T) (*pgxpool.Pool, *outbox.Outbox, int64, string) {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	var tn int64
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('one') RETURNING id").Scan(&tn))
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{})...)
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg})
	require.NoError(t, err)
	at := time.Date(2025, 1, 1, 1, 0, 0, 0, time.UTC)
	pay := seedOp(t, pool, tn, "pay", protocol.ToolPaymentIntent, "stripe", "succeeded", `{"amount":29000,"currency":"usd"}`, at)
	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET vendor_ref = 'pi_1' WHERE id = $1`, pay)
	require.NoError(t, err)
	return pool, ob, tn, pay
}

// TestReportNetsRefundsAgainstPayments: a refund takes its payment's currency (the
// same tenant's op whose vendor ref it names), is checked against the vendor's refund
// in it, and the matched refunds are netted against the matched payments per currency,
// in the JSON and in the CSV's totals.
func TestReportNetsRefundsAgainstPayments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, ob, tn, pay := paymentReportEnv(t)
	since := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(h int) time.Time { return since.Add(time.Duration(h) * time.Hour) }
	const pi, refund = protocol.ToolPaymentIntent, protocol.ToolRefund
	payEUR := seedOp(t, pool, tn, "pay-eur", pi, "stripe", "succeeded", `{"amount":5000,"currency":"eur"}`, at(2))
	r1 := seedOp(t, pool, tn, "refund", refund, "stripe", "succeeded", `{"payment_intent":"pi_1","amount":2500}`, at(3))
	outside := seedOp(t, pool, tn, "refund-outside", refund, "stripe", "succeeded", `{"payment_intent":"pi_outside","amount":100}`, at(4))
	wrong := seedOp(t, pool, tn, "refund-wrong", refund, "stripe", "succeeded", `{"payment_intent":"pi_1","amount":300}`, at(5))

	obj := func(id, op string, amount int64, currency string, h int) vendorapi.VendorObject {
		return vendorapi.VendorObject{ID: id, OpID: op, Amount: amount, Currency: currency, Created: at(h).Add(time.Second)}
	}
	listers := map[string]finance.Lister{"stripe": finance.ListerFunc(func(context.Context, time.Time, time.Time) ([]vendorapi.VendorObject, error) {
		return []vendorapi.VendorObject{obj("pi_1", pay, 29000, "usd", 1), obj("pi_2", payEUR, 5000, "eur", 2),
			obj("re_1", r1, 2500, "usd", 3), obj("re_2", outside, 100, "usd", 4), obj("re_3", wrong, 300, "eur", 5)}, nil
	})}
	rep, err := finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: at(24), Listers: listers, Payments: ob.PaymentOf})
	require.NoError(t, err)

	byOp := map[string]finance.Line{}
	for _, l := range rep.Lines {
		byOp[l.OpID] = l
	}
	require.Equal(t, finance.CategoryMatched, byOp[r1].Category)
	require.Equal(t, "usd", byOp[r1].OpCurrency, "a refund's currency is its payment's")
	require.Equal(t, int64(2500), byOp[r1].OpAmount)
	require.Equal(t, finance.CategoryMatched, byOp[outside].Category)
	require.Empty(t, byOp[outside].OpCurrency, "a payment made outside oncebox: its currency is unknown here")
	require.Equal(t, "usd", byOp[outside].Currency, "the line's currency is then the vendor's")
	require.Equal(t, finance.CategoryMismatch, byOp[wrong].Category, "refunded in another currency than its payment's")
	require.Contains(t, byOp[wrong].Detail, `currency "eur" at the vendor, "usd" in the op`)

	require.Equal(t, []finance.Net{
		{Currency: "eur", Paid: 5000, Refunded: 0, Net: 5000},
		{Currency: "usd", Paid: 29000, Refunded: 2600, Net: 26400},
	}, rep.Nets)

	var buf bytes.Buffer
	require.NoError(t, rep.WriteCSV(&buf))
	records := readCSV(t, &buf)
	require.Len(t, records, 1+len(rep.Lines), "the lines only: the totals are a file of their own")
	for _, rec := range records[1:] {
		require.NotEmpty(t, rec[8], "every line names its currency: %v", rec)
	}
	buf.Reset()
	require.NoError(t, rep.WriteTotalsCSV(&buf))
	totals := readCSV(t, &buf)
	require.Contains(t, totals, []string{"total", refund, "", "usd", "2", "26.00"})
	require.Contains(t, totals, []string{"paid", "", "", "usd", "", "290.00"})
	require.Contains(t, totals, []string{"refunded", "", "", "usd", "", "26.00"})
	require.Contains(t, totals, []string{"net", "", "", "usd", "", "264.00"})
	require.Contains(t, totals, []string{"net", "", "", "eur", "", "50.00"})
}

// TestReportFullRefundNamesItsPayment: a refund whose args name no amount gives back
// what was left of its payment. Its line says so (FullRefund, the payment's amount and
// currency), the vendor's refund is checked in that currency, and the CSV leaves its
// op_amount empty rather than writing 0.
func TestReportFullRefundNamesItsPayment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, ob, tn, pay := paymentReportEnv(t)
	since := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(h int) time.Time { return since.Add(time.Duration(h) * time.Hour) }
	const pi, refund = protocol.ToolPaymentIntent, protocol.ToolRefund
	full := seedOp(t, pool, tn, "refund-full", refund, "stripe", "succeeded", `{"payment_intent":"pi_1"}`, at(2))
	outside := seedOp(t, pool, tn, "refund-outside", refund, "stripe", "succeeded", `{"payment_intent":"pi_outside"}`, at(3))
	mail := seedOp(t, pool, tn, "mail", protocol.ToolMail, "sendgrid", "succeeded", `{"subject":"hi"}`, at(4))

	obj := func(id, op string, amount int64, currency string, h int) vendorapi.VendorObject {
		return vendorapi.VendorObject{ID: id, OpID: op, Amount: amount, Currency: currency, Created: at(h).Add(time.Second)}
	}
	listers := map[string]finance.Lister{"stripe": finance.ListerFunc(func(context.Context, time.Time, time.Time) ([]vendorapi.VendorObject, error) {
		return []vendorapi.VendorObject{obj("pi_1", pay, 29000, "usd", 1), obj("re_1", full, 29000, "usd", 2),
			obj("re_2", outside, 700, "eur", 3)}, nil
	})}
	rep, err := finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: at(24), Listers: listers, Payments: ob.PaymentOf})
	require.NoError(t, err)
	byOp := map[string]finance.Line{}
	for _, l := range rep.Lines {
		byOp[l.OpID] = l
	}
	l := byOp[full]
	require.Equal(t, finance.CategoryMatched, l.Category, l.Detail)
	require.True(t, l.FullRefund)
	require.Equal(t, int64(29000), l.PaymentAmount)
	require.Equal(t, "usd", l.OpCurrency, "a full refund's currency is its payment's")
	require.Zero(t, l.OpAmount)

	o := byOp[outside]
	require.True(t, o.FullRefund)
	require.Zero(t, o.PaymentAmount, "a payment made outside oncebox: its amount is unknown here")
	require.Empty(t, o.OpCurrency)
	require.Equal(t, "eur", o.Currency)
	require.False(t, byOp[mail].FullRefund, "a mail is no refund")

	var buf bytes.Buffer
	require.NoError(t, rep.WriteCSV(&buf))
	records := readCSV(t, &buf)
	for _, rec := range records[1 : 1+len(rep.Lines)] {
		if rec[2] == full {
			require.Equal(t, []string{"usd", "", "usd", "290.00", "usd"}, rec[8:13], "op_amount empty, op_currency the payment's")
		}
	}
}
