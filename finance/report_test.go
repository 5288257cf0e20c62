package finance_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/finance"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendorapi"
)

// seedOp inserts an op row as it would stand after its life so far.
func seedOp(t *testing.T, pool *pgxpool.Pool, tenant int64, key, tool, vendor, status, args string, created time.Time) string {
	t.Helper()
	var id string
	require.NoError(t, pool.QueryRow(context.Background(), `
		INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, vendor_key, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, '\x00', $6, 'vk', $7::timestamptz, $7::timestamptz + interval '3 days') RETURNING id::text`,
		tenant, key, tool, vendor, args, status, created).Scan(&id))
	return id
}

func TestReport(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	ctx := context.Background()
	var t1, t2 int64
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('one') RETURNING id").Scan(&t1))
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('two') RETURNING id").Scan(&t2))

	since := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	until := since.Add(24 * time.Hour)
	at := func(d time.Duration) time.Time { return since.Add(d) }
	const pi, mail = "stripe.payment_intent", "sendgrid.mail"

	matched := seedOp(t, pool, t1, "a-matched", pi, "stripe", "succeeded", `{"amount":1000,"currency":"usd"}`, at(time.Hour))
	late := seedOp(t, pool, t1, "b-late", pi, "stripe", "succeeded", `{"amount":2000,"currency":"usd"}`, until.Add(-time.Second))
	missing := seedOp(t, pool, t1, "c-missing", pi, "stripe", "succeeded", `{"amount":300,"currency":"usd"}`, at(2*time.Hour))
	orphan := seedOp(t, pool, t1, "d-failed", pi, "stripe", "failed", `{"amount":400,"currency":"usd"}`, at(3*time.Hour))
	dup := seedOp(t, pool, t1, "e-dup", pi, "stripe", "succeeded", `{"amount":500,"currency":"usd"}`, at(4*time.Hour))
	mismatch := seedOp(t, pool, t1, "f-mismatch", pi, "stripe", "succeeded", `{"amount":600,"currency":"usd"}`, at(5*time.Hour))
	mailOp := seedOp(t, pool, t1, "g-mail", mail, "sendgrid", "succeeded", `{"to":[{"email":"sha256:ab"}]}`, at(6*time.Hour))
	seedOp(t, pool, t1, "h-pending", pi, "stripe", "pending", `{"amount":700,"currency":"usd"}`, at(7*time.Hour))
	other := seedOp(t, pool, t2, "i-other", pi, "stripe", "succeeded", `{"amount":50,"currency":"eur"}`, at(8*time.Hour))
	yesterday := seedOp(t, pool, t1, "j-yesterday", pi, "stripe", "succeeded", `{"amount":80,"currency":"usd"}`, since.Add(-2*time.Minute))
	var nobody string
	require.NoError(t, pool.QueryRow(ctx, "SELECT gen_random_uuid()::text").Scan(&nobody))

	obj := func(id, op string, amount int64, currency string, created time.Time) vendorapi.VendorObject {
		return vendorapi.VendorObject{ID: id, OpID: op, Amount: amount, Currency: currency, Created: created}
	}
	stripeObjects := []vendorapi.VendorObject{
		obj("pi_a", matched, 1000, "usd", at(time.Hour+time.Second)),
		obj("pi_b", late, 2000, "usd", until.Add(30*time.Second)), // in the margin
		obj("pi_d", orphan, 400, "usd", at(3*time.Hour)),
		obj("pi_e2", dup, 500, "usd", at(4*time.Hour+time.Second)),
		obj("pi_e1", dup, 500, "usd", at(4*time.Hour)),
		obj("pi_f", mismatch, 599, "usd", at(5*time.Hour)),
		obj("pi_i", other, 50, "eur", at(8*time.Hour)),
		obj("pi_j", yesterday, 80, "usd", since.Add(-time.Minute)), // yesterday's, in the margin
		obj("pi_x", nobody, 10, "usd", at(9*time.Hour)),
		obj("pi_y", "not-an-op", 20, "usd", at(10*time.Hour)),
		obj("pi_untagged", "", 30, "usd", at(11*time.Hour)),
	}
	var asked [2]time.Time
	listers := map[string]finance.Lister{
		"stripe": finance.ListerFunc(func(_ context.Context, s, u time.Time) ([]vendorapi.VendorObject, error) {
			asked = [2]time.Time{s, u}
			return stripeObjects, nil
		}),
		"sendgrid": finance.ListerFunc(func(context.Context, time.Time, time.Time) ([]vendorapi.VendorObject, error) {
			return []vendorapi.VendorObject{obj("msg_g", mailOp, 0, "", at(6*time.Hour))}, nil
		}),
	}

	rep, err := finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: until, Listers: listers})
	require.NoError(t, err)
	require.Equal(t, since.Add(-finance.ReportMargin), asked[0])
	require.Equal(t, until.Add(finance.ReportMargin), asked[1])

	type row struct{ cat, op, ids string }
	var got []row
	for _, l := range rep.Lines {
		ids := ""
		for _, id := range l.VendorIDs {
			ids += id + " "
		}
		got = append(got, row{l.Category, l.OpID, ids})
	}
	require.ElementsMatch(t, []row{
		{"matched", matched, "pi_a "},
		{"matched", late, "pi_b "},
		{"matched", mailOp, "msg_g "},
		{"matched", other, "pi_i "},
		{"missing_at_vendor", missing, ""},
		{"orphan_at_vendor", orphan, "pi_d "},
		{"duplicate", dup, "pi_e1 pi_e2 "},
		{"mismatch", mismatch, "pi_f "},
		{"orphan_at_vendor", nobody, "pi_x "},
		{"orphan_at_vendor", "not-an-op", "pi_y "},
	}, got)
	// Sorted by category first.
	for i := 1; i < len(rep.Lines); i++ {
		require.LessOrEqual(t, rep.Lines[i-1].Category, rep.Lines[i].Category)
	}
	require.Equal(t, 6, rep.Problems)
	require.False(t, rep.Clean())
	require.Equal(t, map[string]int{"stripe": 1}, rep.Untagged)
	require.Equal(t, []finance.Total{
		{Tool: mail, Currency: "", Count: 1, Amount: 0},
		{Tool: pi, Currency: "eur", Count: 1, Amount: 50},
		{Tool: pi, Currency: "usd", Count: 2, Amount: 3000},
	}, rep.Totals)
	for _, l := range rep.Lines {
		if l.Category == "mismatch" {
			require.Equal(t, int64(600), l.OpAmount)
			require.Equal(t, int64(599), l.VendorAmount)
			require.Contains(t, l.Detail, "amount $5.99 USD at the vendor, $6.00 USD in the op", "money as money")
		}
	}

	var csvBuf bytes.Buffer
	require.NoError(t, rep.WriteCSV(&csvBuf))
	records := readCSV(t, &csvBuf)
	require.Len(t, records, 1+len(rep.Lines), "the lines, one table under one header")
	require.Equal(t, "category", records[0][0])
	require.Equal(t, "currency", records[0][8])
	for _, rec := range records[1:] {
		require.Len(t, rec, len(records[0]))
		if rec[4] == pi {
			require.NotEmpty(t, rec[8], "every payment line names its currency: %v", rec)
		}
		if rec[2] == mismatch {
			require.Equal(t, []string{"usd", "6.00", "usd", "5.99", "usd"}, rec[8:13], "decimal amounts beside their currency")
		}
	}
	csvBuf.Reset()
	require.NoError(t, rep.WriteTotalsCSV(&csvBuf))
	require.Equal(t, [][]string{
		{"kind", "tool", "vendor", "currency", "count", "amount"},
		{"total", mail, "", "", "1", ""},
		{"total", pi, "", "eur", "1", "0.50"},
		{"total", pi, "", "usd", "2", "30.00"},
		{"paid", "", "", "eur", "", "0.50"},
		{"refunded", "", "", "eur", "", "0.00"},
		{"net", "", "", "eur", "", "0.50"},
		{"paid", "", "", "usd", "", "30.00"},
		{"refunded", "", "", "usd", "", "0.00"},
		{"net", "", "", "usd", "", "30.00"},
	}, readCSV(t, &csvBuf))

	var jsonBuf bytes.Buffer
	require.NoError(t, rep.WriteJSON(&jsonBuf))
	var doc struct {
		Lines    []finance.Line  `json:"lines"`
		Totals   []finance.Total `json:"totals"`
		Problems int             `json:"problems"`
		Clean    bool            `json:"clean"`
	}
	require.NoError(t, json.Unmarshal(jsonBuf.Bytes(), &doc))
	require.Equal(t, rep.Lines, doc.Lines)
	require.Equal(t, rep.Totals, doc.Totals)
	require.Equal(t, 6, doc.Problems)
	require.False(t, doc.Clean)

	// One tenant: the other tenant's op and the orphans naming no op are left out.
	rep, err = finance.BuildReport(ctx, pool, finance.ReportParams{Since: since, Until: until, TenantID: t1, Listers: listers})
	require.NoError(t, err)
	require.Equal(t, 4, rep.Problems)
	for _, l := range rep.Lines {
		require.Equal(t, t1, l.TenantID)
	}

	// A window with only matched ops is clean.
	rep, err = finance.BuildReport(ctx, pool, finance.ReportParams{Since: at(time.Hour), Until: at(time.Hour + time.Minute), Listers: listers})
	require.NoError(t, err)
	require.True(t, rep.Clean())
	require.Len(t, rep.Lines, 1)
}

// readCSV reads a report's CSV: one table, every row as long as its header.
func readCSV(t *testing.T, r io.Reader) [][]string {
	t.Helper()
	cr := csv.NewReader(r)
	records, err := cr.ReadAll()
	require.NoError(t, err)
	return records
}
