package main

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestReviewListNamesTheTenant: `oncebox review list` shows each op's tenant by name,
// not by its numeric id, and --tenant keeps only that tenant's ops.
func TestReviewListNamesTheTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	store := tenant.NewStore(pool)
	for _, name := range []string{"acme", "globex"} {
		tn, _, err := store.Create(ctx, name)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
			status, vendor_key, expires_at) VALUES ($1, $2, 'webhook.post', 'webhook', '{"target":"crm","path":"/x"}',
			'\x00', 'needs_review', 'ob_'||$2, now() + interval '1 day')`, tn.ID, "hook-"+name)
		require.NoError(t, err)
	}
	db := "DATABASE_URL=" + dbtest.ConnString(t, pool)
	out, errOut, code := runCLI(t, "review list", db)
	require.Zero(t, code, out+errOut)
	require.Regexp(t, `(?m)^acme\s+hook-acme\s+webhook\.post`, out)
	require.Regexp(t, `(?m)^globex\s+hook-globex\s+webhook\.post`, out)
	require.NotRegexp(t, regexp.MustCompile(`(?m)^\d+\s+hook-`), out, "no numeric tenant id")

	out, errOut, code = runCLI(t, "review list --tenant globex", db)
	require.Zero(t, code, out+errOut)
	require.Contains(t, out, "hook-globex")
	require.NotContains(t, out, "hook-acme")
}
