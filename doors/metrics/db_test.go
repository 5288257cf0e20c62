package metrics_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/metrics"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// insertOps inserts n succeeded ops with one generate_series into the schema of pool.
func insertOps(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	ctx := context.Background()
	var tenant int64
	err := pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('t-' || gen_random_uuid()) RETURNING id").Scan(&tenant)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, vendor_key, expires_at)
		SELECT $1, 'k' || i, 'stripe.refund', 'stripe', '{}', '\x00', 'succeeded', 'ob_' || i, now() + interval '1 day'
		FROM generate_series(1, $2) AS i`, tenant, n)
	require.NoError(t, err)
}

// countOf returns the value of the oncebox_ops gauge of succeeded refunds in a scrape.
func countOf(scrape string) string {
	for _, line := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(line, `oncebox_ops{status="succeeded",tool="stripe.refund"} `) {
			return strings.Fields(line)[1]
		}
	}
	return ""
}

// TestDBGaugesAreCached: scrapes inside the refresh interval answer from the last
// reading and do not query Postgres; a stale reading is refreshed in the background.
func TestDBGaugesAreCached(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	insertOps(t, pool, 3)
	m := metrics.New(metrics.Config{Pool: pool, RefreshInterval: time.Hour})
	require.Equal(t, "3", countOf(scrape(t, m)), "the first scrape reads")
	insertOps(t, pool, 2)
	pool.Close() // a scrape that still queried Postgres would fail and drop the gauge
	for range 3 {
		out := scrape(t, m)
		require.Equal(t, "3", countOf(out), "scrapes inside the interval answer from the cache")
		require.Contains(t, out, "oncebox_db_gauges_read_timestamp_seconds ")
	}

	pool2 := dbtest.Schema(t)
	insertOps(t, pool2, 4)
	m2 := metrics.New(metrics.Config{Pool: pool2, RefreshInterval: 50 * time.Millisecond})
	require.Equal(t, "4", countOf(scrape(t, m2)))
	insertOps(t, pool2, 1)
	require.Eventually(t, func() bool { return countOf(scrape(t, m2)) == "5" }, 10*time.Second, 20*time.Millisecond,
		"a stale reading is refreshed")
}

// TestScrapeWithAMillionOps measures a scrape with 1,000,000 ops stored (the figure in
// docs/operations.md, Metrics). It takes a minute or more to insert them, so it runs only with
// ONCEBOX_METRICS_1M=1.
func TestScrapeWithAMillionOps(t *testing.T) {
	if os.Getenv("ONCEBOX_METRICS_1M") == "" {
		t.Skip("set ONCEBOX_METRICS_1M=1 to measure a scrape with 1,000,000 ops")
	}
	pool := dbtest.Schema(t)
	start := time.Now()
	insertOps(t, pool, 1_000_000)
	_, err := pool.Exec(context.Background(), "ANALYZE oncebox_op")
	require.NoError(t, err)
	t.Logf("inserted 1,000,000 ops in %s", time.Since(start).Round(time.Millisecond))

	m := metrics.New(metrics.Config{Pool: pool, RefreshInterval: time.Hour})
	start = time.Now()
	require.Equal(t, "1e+06", countOf(scrape(t, m)))
	first := time.Since(start)
	const n = 100
	start = time.Now()
	for range n {
		scrape(t, m)
	}
	each := time.Since(start) / n
	fmt.Printf("metrics with 1,000,000 ops: first scrape (reads Postgres) %s, later scrapes %s each\n",
		first.Round(time.Millisecond), each.Round(time.Microsecond))
	require.Less(t, each, 50*time.Millisecond)
}

// TestBudgetGaugesAndCounters: the budgets' usage in their current windows is a gauge
// (ops, and amounts per currency, summed over tenants); past windows are not; budget
// checks are counted by outcome.
func TestBudgetGaugesAndCounters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	var tenant int64
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('b') RETURNING id").Scan(&tenant))
	_, err := pool.Exec(ctx, `INSERT INTO oncebox_budget_usage (tenant_id, budget, scope, currency, window_start, window_end, ops, amount) VALUES
		($1, 'daily', 'tenant', '', now() - interval '1 hour', now() + interval '1 hour', 7, 0),
		($1, 'daily', 'tenant', 'usd', now() - interval '1 hour', now() + interval '1 hour', 7, 4200),
		($1, 'daily', 'conversation:c', '', now() - interval '1 hour', now() + interval '1 hour', 2, 0),
		($1, 'daily', 'tenant', '', now() - interval '3 hours', now() - interval '1 hour', 99, 0)`, tenant)
	require.NoError(t, err)
	m := metrics.New(metrics.Config{Pool: pool})
	m.BudgetCharged("daily", false)
	m.BudgetCharged("daily", true)
	out := scrape(t, m)
	require.Contains(t, out, `oncebox_budget_used{budget="daily",currency="ops"} 9`)
	require.Contains(t, out, `oncebox_budget_used{budget="daily",currency="usd"} 4200`)
	require.Contains(t, out, `oncebox_budget_checks_total{budget="daily",outcome="admitted"} 1`)
	require.Contains(t, out, `oncebox_budget_checks_total{budget="daily",outcome="exceeded"} 1`)
}
