package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestAuditCLI: `oncebox audit export` prints a tenant's entries; `oncebox audit verify`
// passes on the sealed chain, and exits 1 naming the entry edited in the database.
func TestAuditCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	env := "DATABASE_URL=" + dbtest.ConnString(t, pool)
	var tenant int64
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('acme') RETURNING id").Scan(&tenant))
	_, err := pool.Exec(ctx, "INSERT INTO oncebox_tenant_budget (tenant_id, name, budget, updated_by) VALUES ($1, 'daily', '{}', 'ada')", tenant)
	require.NoError(t, err)
	sealer := audit.NewSealer(audit.Config{Pool: pool})
	require.Eventually(t, func() bool {
		_, err := sealer.SealOnce(ctx)
		require.NoError(t, err)
		return dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_audit WHERE hash IS NULL") == 0
	}, 30*time.Second, 50*time.Millisecond)

	out, errOut, code := runCLI(t, "audit export --tenant acme --format csv", env)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "oncebox_tenant_budget")
	out, errOut, code = runCLI(t, "audit export --tenant acme --tool refund_payment", env)
	require.Zero(t, code, errOut)
	require.Empty(t, out, "a filter keeps ops' entries only")
	_, errOut, code = runCLI(t, "audit export --tenant acme --min-amount 25.00", env)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "minor units")
	out, errOut, code = runCLI(t, "audit verify --tenant acme", env)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "verify")

	var seq int64
	require.NoError(t, pool.QueryRow(ctx, `UPDATE oncebox_audit SET e = jsonb_set(e, '{row,updated_by}', '"mallory"')
		WHERE e ->> 'table' = 'oncebox_tenant_budget' RETURNING seq`).Scan(&seq))
	_, errOut, code = runCLI(t, "audit verify --tenant acme", env)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "does not match its hash")
	require.Contains(t, errOut, fmt.Sprintf("entry seq %d ", seq))
}
