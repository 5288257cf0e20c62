package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestReconcileReportExitStatus runs `oncebox reconcile report` as cron would: exit 0
// when every op matches the vendor's records, 1 when one does not.
func TestReconcileReportExitStatus(t *testing.T) {
	t.Parallel()
	r := newReportSetup(t)
	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, r.pool), "STRIPE_API_KEY=sk_test_x", "STRIPE_API_BASE=" + r.stripeURL,
		"SENDGRID_API_KEY=", "ONCEBOX_WEBHOOK_TARGETS=", "ONCEBOX_LOG_LEVEL=error"}
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	run := func() (int, string) {
		cmd, out := startChild(t, "reconcile report --format json --since "+since+" --until "+until, env...)
		text, err := io.ReadAll(out)
		require.NoError(t, err)
		_ = cmd.Wait()
		return cmd.ProcessState.ExitCode(), string(text)
	}

	code, text := run()
	require.Equal(t, 0, code, text)
	var rep struct {
		Lines []struct {
			Category string `json:"category"`
		} `json:"lines"`
	}
	require.NoError(t, json.Unmarshal([]byte(text), &rep), text)
	require.Len(t, rep.Lines, 1)
	require.Equal(t, "matched", rep.Lines[0].Category)

	// A second succeeded op the vendor knows nothing about: missing at the vendor.
	r.addMissing(t)
	code, text = run()
	require.Equal(t, 1, code, "a mismatch makes the report fail, for cron")
	require.True(t, strings.Contains(text, "missing_at_vendor"), text)
}

// TestReconcileReportSummary: --format summary (the default on a terminal) leads with the
// totals and lists only the problem lines; piped without --format, the report stays CSV.
func TestReconcileReportSummary(t *testing.T) {
	t.Parallel()
	r := newReportSetup(t)
	r.addMissing(t)

	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, r.pool), "STRIPE_API_KEY=sk_test_x", "STRIPE_API_BASE=" + r.stripeURL}
	window := " --since " + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339) + " --until " + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	out, stderr, code := runCLI(t, "reconcile report --format summary"+window, env...)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, out, "1 matched line(s), 1 problem(s)")
	require.Regexp(t, `stripe\.payment_intent\s+usd\s+1\s+\$15\.00 USD\n`, out)
	require.Regexp(t, `usd\s+\$15\.00 USD\s+\$0\.00 USD\s+\$15\.00 USD\n`, out, "payments less refunds, per currency")
	require.Regexp(t, `missing_at_vendor\s+pi-2\s+stripe\.payment_intent\s+succeeded\s+\$9\.00 USD\s+—`, out)
	require.NotContains(t, out, "minor units")
	require.NotContains(t, out, "pi-1", "matched lines are only counted")

	out, _, _ = runCLI(t, "reconcile report"+window, env...)
	require.True(t, strings.HasPrefix(out, "category,tenant_id,"), "piped, the report is CSV: %s", out)
}

// TestReconcileReportRefusedAccount: an op was sent to a Stripe Connect account Stripe
// refuses (acct_x, not connected to the platform). The report still prints: the
// matched payment and its totals, and the op on acct_x as unchecked with a sentence
// that says what to do; it exits 1 saying why, and the totals file has decimals.
func TestReconcileReportRefusedAccount(t *testing.T) {
	t.Parallel()
	r := newReportSetup(t)
	id := r.insertSucceeded(t, "pi-x", 2000, "ob_z", "pi_on_x")
	_, err := r.pool.Exec(context.Background(), "UPDATE oncebox_op SET vendor_account = 'acct_x' WHERE id = $1", id)
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, r.pool), "STRIPE_API_KEY=sk_test_x", "STRIPE_API_BASE=" + r.stripeURL,
		"ONCEBOX_LOG_LEVEL=error"}
	window := " --since " + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339) + " --until " + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	out, stderr, code := runCLI(t, "reconcile report --format summary"+window, env...)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, out, "1 matched line(s), 1 problem(s)")
	require.Contains(t, out, "(not included)", "the window says its end is not included")
	require.Contains(t, out, "Not checked: Stripe refused to list Stripe account acct_x")
	require.Regexp(t, `stripe\.payment_intent\s+usd\s+1\s+\$15\.00 USD\n`, out)
	require.Regexp(t, `unchecked\s+pi-x\s+stripe\.payment_intent\s+succeeded\s+\S*\s+\$20\.00 USD`, out)
	require.Contains(t, stderr, "1 op(s) could not be checked; Stripe refused to list Stripe account acct_x")
	require.NotContains(t, out+stderr, "sk_test_x")

	out, _, code = runCLI(t, "reconcile report --format csv"+window, env...)
	require.Equal(t, 1, code)
	require.Contains(t, out, "unchecked,")
	require.Contains(t, out, ",usd,20.00,usd,,,")
	out, _, code = runCLI(t, "reconcile report --format totals-csv"+window, env...)
	require.Equal(t, 1, code)
	require.Contains(t, out, "kind,tool,vendor,currency,count,amount\ntotal,stripe.payment_intent,,usd,1,15.00\n")
	require.Contains(t, out, "net,,,usd,,15.00\n")
	require.Contains(t, out, "unchecked,,stripe,,1,\n")
}

// reportSetup is a schema with a tenant whose one op, pi-1, succeeded and matches the
// PaymentIntent a fake Stripe holds.
type reportSetup struct {
	pool      *pgxpool.Pool
	tenantID  int64
	stripeURL string
}

func newReportSetup(t *testing.T) *reportSetup {
	t.Helper()
	pool := dbtest.Schema(t)
	tn, _, err := tenant.NewStore(pool).Create(context.Background(), "acme")
	require.NoError(t, err)
	fake := fakestripe.New(fakestripe.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	r := &reportSetup{pool: pool, tenantID: tn.ID, stripeURL: srv.URL}
	opID := r.insertSucceeded(t, "pi-1", 1500, "ob_x", "pi_match")
	fake.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_match", Amount: 1500, Currency: "usd", Status: "succeeded",
		Metadata: map[string]string{"oncebox_op": opID}, Created: time.Now().Add(-time.Minute)})
	return r
}

// addMissing records pi-2, a succeeded op whose PaymentIntent the vendor does not hold.
func (r *reportSetup) addMissing(t *testing.T) {
	t.Helper()
	r.insertSucceeded(t, "pi-2", 900, "ob_y", "pi_gone")
}

// insertSucceeded records a stripe.payment_intent op of amount cents (usd) that
// succeeded a minute ago as vendorRef, and returns its id.
func (r *reportSetup) insertSucceeded(t *testing.T, key string, amount int, vendorKey, vendorRef string) string {
	t.Helper()
	var id string
	require.NoError(t, r.pool.QueryRow(context.Background(), `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor,
		args, fingerprint, status, vendor_key, vendor_ref, expires_at, created_at)
		VALUES ($1, $2, 'stripe.payment_intent', 'stripe', jsonb_build_object('amount', $3::int, 'currency', 'usd'), '\x00',
		'succeeded', $4, $5, now() + interval '1 day', now() - interval '1 minute') RETURNING id::text`,
		r.tenantID, key, amount, vendorKey, vendorRef).Scan(&id))
	return id
}

// TestReconcileReportWindowOutOfRange: `oncebox reconcile report` refuses a window
// before 2000, more than a day ahead, longer than a year or ending before it starts
// (exit 2, a sentence on stderr), and the vendor sees no list call.
func TestReconcileReportWindowOutOfRange(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	fake := fakestripe.New(fakestripe.Config{})
	var gets atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool), "STRIPE_API_KEY=sk_test_x", "STRIPE_API_BASE=" + srv.URL}
	now := time.Now().UTC()
	for _, c := range []struct{ window, says string }{
		{"--since 0001-01-01", "before 2000-01-01"},
		{"--since 0000-01-01T00:00:00Z --until 9999-12-31T23:59:59Z", "before 2000-01-01"},
		{"--since " + now.Format("2006-01-02") + " --until " + now.AddDate(0, 0, 5).Format("2006-01-02"), "more than a day after now"},
		{"--since " + now.AddDate(-2, 0, 0).Format("2006-01-02"), "more than a year"},
		{"--since " + now.Format("2006-01-02") + " --until " + now.AddDate(0, 0, -1).Format("2006-01-02"), "must come before its end"},
	} {
		_, stderr, code := runCLI(t, "reconcile report --format json "+c.window, env...)
		require.Equal(t, 2, code, stderr)
		require.Contains(t, stderr, c.says, c.window)
	}
	require.Zero(t, gets.Load(), "no list call reached the vendor")
}
