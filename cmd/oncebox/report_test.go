package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/dbtest"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/fakestripe"
)

// TestReconcileReportExitStatus runs `oncebox reconcile report` as cron would: exit 0
// when every op matches the vendor's records, 1 when one does not.
func TestReconcileReportExitStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	fake := fakestripe.New(fakestripe.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)

	// One succeeded op whose PaymentIntent the vendor really holds.
	var opID string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, vendor_key, vendor_ref, expires_at, created_at)
		VALUES ($1, 'pi-1', 'stripe.payment_intent', 'stripe', '{"amount":1500,"currency":"usd"}', '\x00', 'succeeded',
		'ob_x', 'pi_match', now() + interval '1 day', now() - interval '1 minute') RETURNING id::text`, tn.ID).Scan(&opID))
	fake.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_match", Amount: 1500, Currency: "usd", Status: "succeeded",
		Metadata: map[string]string{"oncebox_op": opID}, Created: time.Now().Add(-time.Minute)})

	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool), "STRIPE_API_KEY=sk_test_x", "STRIPE_API_BASE=" + srv.URL,
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
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, vendor_key, vendor_ref, expires_at, created_at)
		VALUES ($1, 'pi-2', 'stripe.payment_intent', 'stripe', '{"amount":900,"currency":"usd"}', '\x00', 'succeeded',
		'ob_y', 'pi_gone', now() + interval '1 day', now() - interval '1 minute')`, tn.ID)
	require.NoError(t, err)
	code, text = run()
	require.Equal(t, 1, code, "a mismatch makes the report fail, for cron")
	require.True(t, strings.Contains(text, "missing_at_vendor"), text)
}

// TestReconcileReportSummary: --format summary (the default on a terminal) leads with the
// totals and lists only the problem lines; piped without --format, the report stays CSV.
func TestReconcileReportSummary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	fake := fakestripe.New(fakestripe.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	var opID string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, vendor_key, vendor_ref, expires_at, created_at)
		VALUES ($1, 'pi-1', 'stripe.payment_intent', 'stripe', '{"amount":1500,"currency":"usd"}', '\x00', 'succeeded',
		'ob_x', 'pi_match', now() + interval '1 day', now() - interval '1 minute') RETURNING id::text`, tn.ID).Scan(&opID))
	fake.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_match", Amount: 1500, Currency: "usd", Status: "succeeded",
		Metadata: map[string]string{"oncebox_op": opID}, Created: time.Now().Add(-time.Minute)})
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, vendor_key, vendor_ref, expires_at, created_at)
		VALUES ($1, 'pi-2', 'stripe.payment_intent', 'stripe', '{"amount":900,"currency":"usd"}', '\x00', 'succeeded',
		'ob_y', 'pi_gone', now() + interval '1 day', now() - interval '1 minute')`, tn.ID)
	require.NoError(t, err)

	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool), "STRIPE_API_KEY=sk_test_x", "STRIPE_API_BASE=" + srv.URL}
	window := " --since " + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339) + " --until " + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	out, stderr, code := runCLI(t, "reconcile report --format summary"+window, env...)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, out, "1 matched line(s), 1 problem(s)")
	require.Regexp(t, `stripe\.payment_intent\s+usd\s+1\s+1500`, out)
	require.Regexp(t, `missing_at_vendor\s+pi-2`, out)
	require.NotContains(t, out, "pi-1", "matched lines are only counted")

	out, _, _ = runCLI(t, "reconcile report"+window, env...)
	require.True(t, strings.HasPrefix(out, "category,tenant_id,"), "piped, the report is CSV: %s", out)
}
