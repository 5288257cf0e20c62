package cells

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestEveryTableDecided: every oncebox table of the schema is either moved with its
// tenant or named as the cell's own, and every table that points at a tenant, an op or
// a token is moved. A new table fails here until its move is decided.
func TestEveryTableDecided(t *testing.T) {
	pool := dbtest.Schema(t)
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND c.relname LIKE 'oncebox%'`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	require.NoError(t, rows.Err())
	moved := map[string]bool{}
	for _, tb := range tenantTables {
		moved[tb.name] = true
	}
	for _, n := range tables {
		_, own := installationTables[n]
		require.True(t, moved[n] || own, "table %s: neither moved with its tenant (tenantTables) nor the cell's own (installationTables)", n)
		require.False(t, moved[n] && own, "table %s is in both lists", n)
	}
	require.Len(t, moved, len(tenantTables), "a table listed twice")
	refs, err := pool.Query(ctx, `SELECT conrelid::regclass::text FROM pg_constraint
WHERE contype = 'f' AND connamespace = current_schema()::regnamespace
  AND confrelid::regclass::text IN ('oncebox_tenant', 'oncebox_op', 'oncebox_api_token')`)
	require.NoError(t, err)
	for refs.Next() {
		var n string
		require.NoError(t, refs.Scan(&n))
		require.True(t, moved[n], "%s points at a tenant's row but is not moved", n)
	}
	require.NoError(t, refs.Err())
}

// twoCells returns a home cell and a cell "eu", each a fresh schema.
func twoCells(t *testing.T) (home, eu *pgxpool.Pool, m *Mover) {
	t.Helper()
	home, eu = dbtest.Schema(t), dbtest.Schema(t)
	c, err := AddCell(context.Background(), home, eu, "eu")
	require.NoError(t, err)
	require.Equal(t, Cell{Name: "eu", Number: 1}, c)
	again, err := AddCell(context.Background(), home, eu, "eu")
	require.NoError(t, err)
	require.Equal(t, c, again, "adding a cell again keeps its number")
	require.NoError(t, CheckCell(context.Background(), home, eu, "eu"))
	require.Error(t, CheckCell(context.Background(), home, home, "eu"), "the home database is not cell eu")
	return home, eu, &Mover{Home: home, Cells: map[string]*pgxpool.Pool{Home: home, "eu": eu},
		Wait: time.Second, Drain: 10 * time.Millisecond, Logf: t.Logf}
}

func seedTenant(t *testing.T, pool *pgxpool.Pool, name, status string) int64 {
	t.Helper()
	ctx := context.Background()
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_tenant (name) VALUES ($1) RETURNING id`, name).Scan(&id))
	_, err := pool.Exec(ctx, `INSERT INTO oncebox_op (id, tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, expires_at, vendor_key)
VALUES (gen_random_uuid(), $1, 'k1', 'webhook.post', 'webhook', '{}', '\x01', $2, now() + interval '1 day', 'vk')`, id, status)
	require.NoError(t, err)
	return id
}

// TestAMoveWaitsForWorkInFlightAndUndoesItself: a tenant with an op still pending is
// fenced in its cell (a new op is refused as "cannot connect now", 57P03, which every
// door answers 503 with Retry-After; another tenant's is not), the move gives up after
// its wait, and everything is as before: no fence, no trigger, the directory back.
func TestAMoveWaitsForWorkInFlightAndUndoesItself(t *testing.T) {
	ctx := context.Background()
	home, eu, m := twoCells(t)
	id := seedTenant(t, home, "acme", "pending")
	other := seedTenant(t, home, "beta", "succeeded")
	plan, err := m.Plan(ctx, "acme", "eu")
	require.NoError(t, err)
	require.GreaterOrEqual(t, plan.InFlight, int64(1), "its pending op (and its unsealed audit entries)")

	fenced := make(chan error, 1)
	tried := false
	m.Logf = func(format string, args ...any) {
		t.Logf(format, args...)
		if format == "fenced %s in %s: no new op, no decision" && len(fenced) == 0 && !tried {
			tried = true
			_, err := home.Exec(ctx, `INSERT INTO oncebox_op (id, tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, expires_at, vendor_key)
VALUES (gen_random_uuid(), $1, 'k2', 'webhook.post', 'webhook', '{}', '\x01', 'pending', now() + interval '1 day', gen_random_uuid()::text)`, id)
			_, err2 := home.Exec(ctx, `INSERT INTO oncebox_op (id, tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, expires_at, vendor_key)
VALUES (gen_random_uuid(), $1, 'k2', 'webhook.post', 'webhook', '{}', '\x01', 'pending', now() + interval '1 day', gen_random_uuid()::text)`, other)
			fenced <- errors.Join(err, err2)
		}
	}
	_, err = m.Move(ctx, "acme", "eu")
	require.ErrorIs(t, err, ErrBusy)
	ferr := <-fenced
	var pgErr *pgconn.PgError
	require.ErrorAs(t, ferr, &pgErr)
	require.Equal(t, "57P03", pgErr.Code, "a fenced tenant's new op is refused as unavailable")
	require.Equal(t, 1, dbtest.Count(t, home, `SELECT count(*) FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key = 'k2'`, other),
		"another tenant's op goes in")
	require.Zero(t, dbtest.Count(t, home, `SELECT count(*) FROM oncebox_tenant_fence`))
	require.Zero(t, dbtest.Count(t, home, `SELECT count(*) FROM pg_trigger WHERE tgname = 'oncebox_tenant_fence' AND tgrelid = 'oncebox_op'::regclass`))
	require.Equal(t, Placement{Cell: Home}, must(Placed(ctx, home, "acme")))
	require.Zero(t, dbtest.Count(t, eu, `SELECT count(*) FROM oncebox_tenant`))

	// Settled and sealed, it moves; its rows keep their ids, and leave home.
	_, err = home.Exec(ctx, `UPDATE oncebox_op SET status = 'succeeded' WHERE tenant_id = $1`, id)
	require.NoError(t, err)
	sealAll(t, home)
	_, err = m.Move(ctx, "acme", "eu")
	require.NoError(t, err)
	require.Equal(t, Placement{Cell: "eu"}, must(Placed(ctx, home, "acme")))
	require.Equal(t, 1, dbtest.Count(t, eu, `SELECT count(*) FROM oncebox_tenant WHERE id = $1 AND name = 'acme'`, id))
	require.Equal(t, 1, dbtest.Count(t, eu, `SELECT count(*) FROM oncebox_op WHERE tenant_id = $1`, id))
	require.Zero(t, dbtest.Count(t, home, `SELECT count(*) FROM oncebox_op WHERE tenant_id = $1`, id))
	require.Equal(t, 1, dbtest.Count(t, home, `SELECT count(*) FROM oncebox_tenant WHERE name = 'beta'`))

	rep := must(audit.Verify(ctx, eu, id, nil))
	require.Nil(t, rep.Mismatch, "the audit chain moved whole")
	require.Positive(t, rep.Sealed)
	require.Zero(t, rep.Unsealed)

	// And back home, through the same steps.
	_, err = m.Move(ctx, "acme", Home)
	require.NoError(t, err)
	require.Equal(t, Placement{Cell: Home}, must(Placed(ctx, home, "acme")))
	require.Zero(t, dbtest.Count(t, home, `SELECT count(*) FROM oncebox_cell_tenant`), "home needs no directory row")
	require.Equal(t, 1, dbtest.Count(t, home, `SELECT count(*) FROM oncebox_op WHERE tenant_id = $1`, id))
	_, err = m.Move(ctx, "acme", Home)
	require.ErrorContains(t, err, "already in cell")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestUseXIDsAdvancesTheCluster: the catch-up of a target's transaction ids (a move
// between two clusters, whose audit chain is ordered by transaction id) really uses
// them up. Two schemas of one cluster share its counter, so a move in these tests never
// needs it; the two-cell chaos run (make chaos-cells) does.
func TestUseXIDsAdvancesTheCluster(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.Schema(t)
	next := func() int64 {
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::numeric::bigint`).Scan(&n))
		return n
	}
	before := next()
	require.NoError(t, useXIDs(ctx, pool, 500))
	require.GreaterOrEqual(t, next()-before, int64(500))
}

// TestAFenceWaitsWithoutStallingTheOtherTenants: the fence's trigger waits for a long
// transaction writing oncebox_op, but never holds the other tenants' writes queued
// behind it for longer than its lock timeout, and goes in once that transaction ends.
func TestAFenceWaitsWithoutStallingTheOtherTenants(t *testing.T) {
	ctx := context.Background()
	home, _, _ := twoCells(t)
	acme := seedTenant(t, home, "acme", "succeeded")
	beta := seedTenant(t, home, "beta", "succeeded")
	gamma := seedTenant(t, home, "gamma", "succeeded")
	insert := func(q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}, tenant int64, key string) error {
		_, err := q.Exec(ctx, `INSERT INTO oncebox_op (id, tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, expires_at, vendor_key)
VALUES (gen_random_uuid(), $1, $2, 'webhook.post', 'webhook', '{}', '\x01', 'pending', now() + interval '1 day', gen_random_uuid()::text)`, tenant, key)
		return err
	}
	long, err := home.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, insert(long, beta, "long"))
	fenced := make(chan error, 1)
	began := time.Now()
	go func() { fenced <- fence(ctx, home, acme, "eu") }()
	time.Sleep(200 * time.Millisecond)
	var slowest time.Duration
	var stalled error
	for i := range 5 {
		start := time.Now()
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := home.Exec(ictx, `INSERT INTO oncebox_op (id, tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, expires_at, vendor_key)
VALUES (gen_random_uuid(), $1, $2, 'webhook.post', 'webhook', '{}', '\x01', 'pending', now() + interval '1 day', gen_random_uuid()::text)`, gamma, fmt.Sprintf("g%d", i))
		cancel()
		stalled = errors.Join(stalled, err)
		slowest = max(slowest, time.Since(start))
		time.Sleep(150 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, long.Commit(ctx))
	require.NoError(t, stalled, "another tenant's insert waited behind the fence")
	require.Less(t, slowest, 1500*time.Millisecond, "another tenant's insert waited behind the fence")
	require.NoError(t, <-fenced)
	require.Greater(t, time.Since(began), time.Second, "the fence went in before the long transaction ended")
	require.Error(t, insert(home, acme, "after"), "acme is fenced")
	require.NoError(t, unfence(ctx, home, acme))
	require.NoError(t, insert(home, acme, "after"))
}

// sealAll seals every audit entry of the cell, as its serve's sealer does: a round seals
// only below the oldest transaction still running in the cluster (other tests' too), so
// it is repeated until none is left.
func sealAll(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	sealer := audit.NewSealer(audit.Config{Pool: pool})
	require.Eventually(t, func() bool {
		_, err := sealer.SealOnce(context.Background())
		require.NoError(t, err)
		return dbtest.Count(t, pool, `SELECT count(*) FROM oncebox_audit WHERE hash IS NULL`) == 0
	}, 30*time.Second, 50*time.Millisecond, "audit entries left unsealed")
}
