package migrations_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/migrations"
)

// insertOp inserts an op of tenant (named) at vendor "things" under key, with the
// reference ref ("" none), as any release's enqueue and record leave it, and returns its id.
func insertOp(t *testing.T, pool *pgxpool.Pool, tenant, key, ref string, typed bool) string {
	t.Helper()
	var id string
	require.NoError(t, pool.QueryRow(context.Background(), `
		WITH t AS (INSERT INTO oncebox_tenant (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id)
		INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, vendor_key, expires_at,
			vendor_ref, vendor_ref_typed)
		SELECT t.id, $2, 'things.make', 'things', '{}', '\x01', 'succeeded', 'vk-' || $2, now() + interval '1 day', nullif($3, ''), $4
		FROM t RETURNING id::text`, tenant, key, ref, typed).Scan(&id))
	return id
}

// opRefs lists oncebox_op_ref's rows as "tenant vendor ref op typed", the tenant by name
// (by id once deleted).
func opRefs(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT coalesce(t.name, r.tenant_id::text), r.vendor, r.vendor_ref, r.op_id::text, r.typed
		FROM oncebox_op_ref r LEFT JOIN oncebox_tenant t ON t.id = r.tenant_id ORDER BY 1, 3, 4`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var tenant, vendor, ref, op string
		var typed bool
		err := row.Scan(&tenant, &vendor, &ref, &op, &typed)
		return fmt.Sprintf("%s %s %s %s %t", tenant, vendor, ref, op, typed), err
	})
	require.NoError(t, err)
	return out
}

// TestOpRefsOfEarlierOpsAreBackfilled: ops recorded on the schema before migration 034
// (v0.1.0's) have their references in oncebox_op_ref once it is applied, typed ones
// marked so; an op without a reference has no row.
func TestOpRefsOfEarlierOpsAreBackfilled(t *testing.T) {
	t.Parallel()
	pool := emptySchema(t)
	migrateBefore(t, pool, "op_ref")
	said := insertOp(t, pool, "acme", "said", "thing_1", false)
	typed := insertOp(t, pool, "acme", "typed", "thing_2", true)
	insertOp(t, pool, "acme", "none", "", false)
	other := insertOp(t, pool, "globex", "said", "thing_1", false)

	res, err := migrations.Migrate(context.Background(), pool, nil)
	require.NoError(t, err)
	require.Contains(t, res.Oncebox, 34)
	require.ElementsMatch(t, []string{
		"acme things thing_1 " + said + " false",
		"acme things thing_2 " + typed + " true",
		"globex things thing_1 " + other + " false",
	}, opRefs(t, pool))
}

// TestOpRefFollowsTheOp: oncebox_op_ref stays true to oncebox_op through writes that
// touch only oncebox_op, as a v0.1.0 process makes them: a reference recorded, the same
// one recorded again, another one typed by a person, the vendor's own one typed again,
// a reference cleared, an op inserted with one, an op deleted (the purge), and a tenant
// deleted (its ops with it).
func TestOpRefFollowsTheOp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptySchema(t)
	_, err := migrations.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	op := insertOp(t, pool, "acme", "op", "", false)
	require.Empty(t, opRefs(t, pool))
	set := func(sql string) {
		t.Helper()
		_, err := pool.Exec(ctx, `UPDATE oncebox_op SET `+sql+` WHERE id = $1`, op)
		require.NoError(t, err)
	}

	set(`status = 'succeeded', vendor_ref = 'thing_1'`)
	require.Equal(t, []string{"acme things thing_1 " + op + " false"}, opRefs(t, pool))
	set(`vendor_ref = coalesce(nullif('thing_1', ''), vendor_ref), updated_at = now()`)
	require.Equal(t, []string{"acme things thing_1 " + op + " false"}, opRefs(t, pool))
	set(`vendor_ref = 'thing_2', vendor_ref_typed = true`)
	require.Equal(t, []string{"acme things thing_2 " + op + " true"}, opRefs(t, pool), "the typed reference replaces the vendor's")
	set(`vendor_ref = 'thing_1', vendor_ref_typed = false`)
	require.Equal(t, []string{"acme things thing_1 " + op + " false"}, opRefs(t, pool))
	set(`vendor_ref_typed = true`)
	require.Equal(t, []string{"acme things thing_1 " + op + " true"}, opRefs(t, pool))
	set(`vendor_ref = NULL, vendor_ref_typed = false`)
	require.Empty(t, opRefs(t, pool))

	set(`vendor_ref = 'thing_1'`)
	second := insertOp(t, pool, "acme", "second", "thing_1", false)
	other := insertOp(t, pool, "globex", "other", "thing_3", false)
	require.ElementsMatch(t, []string{
		"acme things thing_1 " + op + " false",
		"acme things thing_1 " + second + " false",
		"globex things thing_3 " + other + " false",
	}, opRefs(t, pool), "two ops may record one reference")
	_, err = pool.Exec(ctx, `DELETE FROM oncebox_op WHERE id = $1`, op)
	require.NoError(t, err)
	require.Equal(t, []string{
		"acme things thing_1 " + second + " false",
		"globex things thing_3 " + other + " false",
	}, opRefs(t, pool))
	_, err = pool.Exec(ctx, `DELETE FROM oncebox_tenant WHERE name = 'globex'`)
	require.NoError(t, err)
	require.Equal(t, []string{"acme things thing_1 " + second + " false"}, opRefs(t, pool))
}
