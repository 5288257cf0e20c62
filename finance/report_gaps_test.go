package finance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/finance"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendorapi"
)

// rangeLister is a Lister that, as a vendor does, returns only the objects created in
// the range asked for, and remembers the last range.
type rangeLister struct {
	objects []vendorapi.VendorObject
	asked   [2]time.Time
}

func (l *rangeLister) ListObjects(_ context.Context, since, until time.Time) ([]vendorapi.VendorObject, error) {
	l.asked = [2]time.Time{since, until}
	var out []vendorapi.VendorObject
	for _, o := range l.objects {
		if !o.Created.Before(since) && o.Created.Before(until) {
			out = append(out, o)
		}
	}
	return out, nil
}

func reportTenant(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), "INSERT INTO oncebox_tenant (name) VALUES ('acme') RETURNING id").Scan(&id))
	return id
}

type reportRow struct{ cat, op string }

func reportRows(rep *finance.Report) []reportRow {
	rows := []reportRow{}
	for _, l := range rep.Lines {
		rows = append(rows, reportRow{l.Category, l.OpID})
	}
	return rows
}

// TestReportDeclineIsConsistent: a declined payment leaves a tagged PaymentIntent that
// records the refusal while the op failed; that is consistent, not an orphan, in the
// window of the op's creation and in the window of the object's.
func TestReportDeclineIsConsistent(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	ctx := context.Background()
	tn := reportTenant(t, pool)
	since := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	until := since.Add(24 * time.Hour)
	at := func(d time.Duration) time.Time { return since.Add(d) }
	const pi, refund = "stripe.payment_intent", "stripe.refund"
	confirmed := `{"amount":1000,"currency":"usd","confirm":true}`

	declined := seedOp(t, pool, tn, "a-declined", pi, "stripe", "failed", confirmed, at(time.Hour))
	canceled := seedOp(t, pool, tn, "b-canceled", pi, "stripe", "failed", confirmed, at(2*time.Hour))
	refundFailed := seedOp(t, pool, tn, "c-refund", refund, "stripe", "failed", `{"amount":1000,"currency":"usd"}`, at(3*time.Hour))
	charged := seedOp(t, pool, tn, "d-charged", pi, "stripe", "failed", confirmed, at(4*time.Hour))
	unconfirmed := seedOp(t, pool, tn, "e-unconfirmed", pi, "stripe", "failed", `{"amount":1000,"currency":"usd"}`, at(5*time.Hour))
	// Created just before the window, declined just inside it.
	yesterday := seedOp(t, pool, tn, "f-yesterday", pi, "stripe", "failed", confirmed, since.Add(-time.Minute))

	// The objects as the Stripe adapter lists them: it says which record a refusal.
	obj := func(id, op, status string, created time.Time) vendorapi.VendorObject {
		o := vendorapi.VendorObject{ID: id, OpID: op, Status: status, Amount: 1000, Currency: "usd", Created: created}
		if o.Status != "succeeded" && op != unconfirmed {
			o.Refused = true // declined (last_payment_error), canceled, or a failed refund
		}
		return o
	}
	lister := &rangeLister{objects: []vendorapi.VendorObject{
		obj("pi_a", declined, "requires_payment_method", at(time.Hour)),
		obj("pi_b", canceled, "canceled", at(2*time.Hour)),
		obj("re_c", refundFailed, "failed", at(3*time.Hour)),
		obj("pi_d", charged, "succeeded", at(4*time.Hour)),
		obj("pi_e", unconfirmed, "requires_payment_method", at(5*time.Hour)),
		obj("pi_f", yesterday, "requires_payment_method", since.Add(time.Second)),
	}}
	listers := map[string]finance.Lister{"stripe": lister}

	rep, err := finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: until, Listers: listers})
	require.NoError(t, err)
	// A failed op that the vendor charged, or whose PaymentIntent was made but never
	// confirmed, is still an orphan.
	require.ElementsMatch(t, []reportRow{
		{finance.CategoryOrphanAtVendor, charged},
		{finance.CategoryOrphanAtVendor, unconfirmed},
	}, reportRows(rep))
	require.Equal(t, 2, rep.Problems)

	// A window holding only declines is clean.
	rep, err = finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: at(3*time.Hour + time.Minute), Listers: listers})
	require.NoError(t, err)
	require.Empty(t, rep.Lines)
	require.True(t, rep.Clean())
}

// TestReportUncheckedIsNotClean: an op whose vendor has no Lister cannot be compared: it
// gets an unchecked line, in the CSV and the JSON, and the report is not clean.
func TestReportUncheckedIsNotClean(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	ctx := context.Background()
	tn := reportTenant(t, pool)
	since := time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)
	until := since.Add(24 * time.Hour)

	matched := seedOp(t, pool, tn, "a-pi", "stripe.payment_intent", "stripe", "succeeded", `{"amount":700,"currency":"usd"}`, since.Add(time.Hour))
	hook := seedOp(t, pool, tn, "b-hook", "webhook.post", "webhook", "succeeded", `{"target":"hooks","body":{}}`, since.Add(2*time.Hour))
	listers := map[string]finance.Lister{"stripe": &rangeLister{objects: []vendorapi.VendorObject{
		{ID: "pi_a", OpID: matched, Amount: 700, Currency: "usd", Created: since.Add(time.Hour)},
	}}}

	rep, err := finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: until, Listers: listers})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"webhook": 1}, rep.Unchecked)
	require.Equal(t, []reportRow{{finance.CategoryMatched, matched}, {finance.CategoryUnchecked, hook}}, reportRows(rep))
	l := rep.Lines[1]
	require.Equal(t, "webhook", l.Vendor)
	require.Equal(t, "succeeded", l.OpStatus)
	require.Equal(t, "b-hook", l.Key)
	require.Contains(t, l.Detail, "no lister for vendor webhook")
	require.Equal(t, 1, rep.Problems)
	require.False(t, rep.Clean(), "an unchecked op makes the report fail, for cron")

	var csvBuf bytes.Buffer
	require.NoError(t, rep.WriteCSV(&csvBuf))
	records := readCSV(t, &csvBuf)
	var found bool
	for _, r := range records {
		if r[0] == finance.CategoryUnchecked {
			found = true
			require.Equal(t, hook, r[2])
			require.Equal(t, "webhook", r[5])
		}
	}
	require.True(t, found, "the CSV lists the unchecked op")

	var jsonBuf bytes.Buffer
	require.NoError(t, rep.WriteJSON(&jsonBuf))
	var doc struct {
		Lines     []finance.Line `json:"lines"`
		Unchecked map[string]int `json:"unchecked"`
		Clean     bool           `json:"clean"`
	}
	require.NoError(t, json.Unmarshal(jsonBuf.Bytes(), &doc))
	require.False(t, doc.Clean)
	require.Equal(t, rep.Lines, doc.Lines)
	require.Equal(t, map[string]int{"webhook": 1}, doc.Unchecked)

	// A vendor that cannot list anything by nature is counted, not held against the report.
	rep, err = finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: until, Listers: listers,
		Unlistable: []string{"webhook"}})
	require.NoError(t, err)
	require.True(t, rep.Clean())
	require.Empty(t, rep.Unchecked)
	require.Equal(t, map[string]int{"webhook": 1}, rep.Unlistable)
	require.Equal(t, []reportRow{{finance.CategoryMatched, matched}}, reportRows(rep))
}

// TestReportListsUpToTheLastAttempt: an op created at the end of the window but sent
// hours later (it awaited approval, or its worker died and the reconciler adopted the
// object) is matched with its object, not reported missing; the objects of later ops
// listed on the way are left to their own window.
func TestReportListsUpToTheLastAttempt(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	ctx := context.Background()
	tn := reportTenant(t, pool)
	since := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	until := since.Add(24 * time.Hour)
	const pi = "stripe.payment_intent"
	args := `{"amount":900,"currency":"usd"}`
	attempt := func(op string, started time.Time, finished *time.Time, updated time.Time) {
		t.Helper()
		_, err := pool.Exec(ctx, `INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at, finished_at, outcome)
			VALUES ($1, 1, gen_random_uuid(), 'vk', $2, $3, 'succeeded')`, op, started, finished)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, "UPDATE oncebox_op SET updated_at = $2 WHERE id = $1", op, updated)
		require.NoError(t, err)
	}

	// Approved two hours after the window ended.
	approved := seedOp(t, pool, tn, "a-approved", pi, "stripe", "succeeded", args, until.Add(-time.Second))
	sent := until.Add(2 * time.Hour)
	done := sent.Add(time.Second)
	attempt(approved, sent, &done, done)
	// Its worker died mid-request three hours after the window; the reconciler adopted
	// the object it found.
	adopted := seedOp(t, pool, tn, "b-adopted", pi, "stripe", "succeeded", args, until.Add(-2*time.Second))
	died := until.Add(3 * time.Hour)
	attempt(adopted, died, nil, died.Add(10*time.Minute))
	// Sent in time.
	onTime := seedOp(t, pool, tn, "c-on-time", pi, "stripe", "succeeded", args, since.Add(time.Hour))
	onTimeDone := since.Add(time.Hour + time.Second)
	attempt(onTime, since.Add(time.Hour), &onTimeDone, onTimeDone)
	// The next window's op, whose object falls in the widened listing.
	next := seedOp(t, pool, tn, "d-next", pi, "stripe", "succeeded", args, until.Add(time.Hour))

	obj := func(id, op string, created time.Time) vendorapi.VendorObject {
		return vendorapi.VendorObject{ID: id, OpID: op, Status: "succeeded", Amount: 900, Currency: "usd", Created: created}
	}
	lister := &rangeLister{objects: []vendorapi.VendorObject{
		obj("pi_a", approved, sent.Add(500*time.Millisecond)),
		obj("pi_b", adopted, died.Add(2*time.Second)),
		obj("pi_c", onTime, since.Add(time.Hour)),
		obj("pi_d", next, until.Add(time.Hour)),
		obj("pi_untagged", "", until.Add(time.Hour)),
	}}
	rep, err := finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: until,
		Listers: map[string]finance.Lister{"stripe": lister}})
	require.NoError(t, err)
	require.Equal(t, since.Add(-finance.ReportMargin), lister.asked[0])
	require.Equal(t, died.Add(10*time.Minute+finance.ReportMargin), lister.asked[1].UTC(),
		"listed up to the latest moment an op of the window may have been sent")
	require.ElementsMatch(t, []reportRow{
		{finance.CategoryMatched, approved},
		{finance.CategoryMatched, adopted},
		{finance.CategoryMatched, onTime},
	}, reportRows(rep))
	require.True(t, rep.Clean())
	require.Empty(t, rep.Untagged, "untagged objects past the window belong to a later window")

	// A window whose ops were all sent in time is listed with the margin only.
	rep, err = finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: since.Add(2 * time.Hour),
		Listers: map[string]finance.Lister{"stripe": lister}})
	require.NoError(t, err)
	require.Equal(t, since.Add(2*time.Hour+finance.ReportMargin), lister.asked[1].UTC())
	require.Equal(t, []reportRow{{finance.CategoryMatched, onTime}}, reportRows(rep))
}
