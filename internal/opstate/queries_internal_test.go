package opstate

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/dbtest"
)

// TestRecordBeforeJobCompleteUsesGenericPlans pins the measured optimisation of the
// record transaction: after its record statement, the rest of the transaction (River's
// JobCompleteTx) uses generic plans, and nothing outlives the transaction.
func TestRecordBeforeJobCompleteUsesGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// One connection, so that the check after the transaction sees the same session.
	pool := dbtest.SchemaWithConfig(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	args := []any{"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000", Succeeded,
		nil, nil, "", false, nil, nil, "succeeded", "", nil, true}
	mode := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		var m string
		require.NoError(t, q.QueryRow(ctx, "SELECT current_setting('plan_cache_mode')").Scan(&m))
		return m
	}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var recorded, finished bool
		require.NoError(t, tx.QueryRow(ctx, sqlRecordAndFinishBeforeJobComplete, args...).Scan(&recorded, &finished))
		require.False(t, recorded)
		require.False(t, finished)
		require.Equal(t, "force_generic_plan", mode(tx))
		return nil
	}))
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	require.Equal(t, "auto", mode(conn))
}
