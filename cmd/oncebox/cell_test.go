package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestCellCLI: a cell added, a tenant created in it, the tenant found by lookup and
// audit through the directory (--cells with the home cell's URL), a dry run that says
// what a move would do and changes nothing, the move, and refusals that say why.
func TestCellCLI(t *testing.T) {
	t.Parallel()
	euPool := dbtest.Schema(t)
	home, eu := dbtest.ConnString(t, dbtest.Schema(t)), dbtest.ConnString(t, euPool)
	cellsEnv := "ONCEBOX_CELLS=eu=" + eu

	out, errOut, code := runCLI(t, "cell add eu --cell-url "+eu+" --database-url "+home)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "cell eu is number 1")
	out, _, code = runCLI(t, "cell list --database-url "+home)
	require.Zero(t, code)
	require.Regexp(t, `(?m)^home\s+0$`, out)
	require.Regexp(t, `(?m)^eu\s+1$`, out)
	_, errOut, code = runCLI(t, "cell add Bad --cell-url "+eu+" --database-url "+home)
	require.Equal(t, 2, code, errOut)

	out, errOut, code = runCLI(t, "tenant create euco --cell eu --database-url "+home, cellsEnv)
	require.Zero(t, code, errOut)
	require.True(t, strings.HasPrefix(strings.TrimSpace(out), "obx_"), out)
	_, errOut, code = runCLI(t, "tenant create euco --database-url "+eu)
	require.NotZero(t, code, "a second tenant of the same name")
	_, errOut, code = runCLI(t, "tenant create euco --database-url "+home)
	require.NotZero(t, code, "a second tenant of the same name in the home cell")
	require.Contains(t, errOut, "in cell eu")
	_, errOut, code = runCLI(t, "tenant create other --cell mars --database-url "+home, cellsEnv)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "not among --cells")

	// lookup and audit read the tenant's cell.
	_, errOut, code = runCLI(t, "lookup --tenant euco nokey --database-url "+home, cellsEnv)
	require.NotContains(t, errOut, "not found: tenant", "lookup looked in the home cell")
	_, errOut, code = runCLI(t, "audit verify --tenant euco --database-url "+home, cellsEnv)
	require.Zero(t, code, errOut)
	_, errOut, code = runCLI(t, "audit verify --tenant euco --database-url "+home)
	require.NotZero(t, code, "without --cells the home cell has no euco")

	out, errOut, code = runCLI(t, "tenant move euco --to home --dry-run --database-url "+home, cellsEnv)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "would move euco")
	require.Contains(t, out, "oncebox_api_token")
	_, _, code = runCLI(t, "tenant list --database-url "+home)
	require.Zero(t, code)
	out, _, _ = runCLI(t, "tenant list --database-url "+eu)
	require.Contains(t, out, "euco", "the dry run moved nothing")

	// The cell's sealer (serve's periodic role) chains the tenant's audit entries; a
	// move waits for it. No serve runs here: seal once, as it would.
	sealer := audit.NewSealer(audit.Config{Pool: euPool})
	require.Eventually(t, func() bool { // a round seals only below the cluster's oldest running transaction
		_, err := sealer.SealOnce(context.Background())
		require.NoError(t, err)
		return dbtest.Count(t, euPool, `SELECT count(*) FROM oncebox_audit WHERE hash IS NULL`) == 0
	}, 30*time.Second, 50*time.Millisecond, "audit entries left unsealed")
	out, errOut, code = runCLI(t, "tenant move euco --to home --drain 10ms --database-url "+home, cellsEnv)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "moved euco")
	out, _, _ = runCLI(t, "tenant list --database-url "+home)
	require.Contains(t, out, "euco")
	_, errOut, code = runCLI(t, "tenant move euco --to home --database-url "+home, cellsEnv)
	require.NotZero(t, code)
	require.Contains(t, errOut, "already in cell")
}
