package opstate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestRecordBeforeJobCompleteUsesGenericPlans pins the measured optimisation of the
// record transaction: after its record statement, the rest of the transaction (River's
// JobCompleteTx) uses generic plans, and nothing outlives the transaction.
func TestRecordBeforeJobCompleteUsesGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// One connection, so that the check after the transaction sees the same session.
	pool := dbtest.SchemaWithConfig(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	args := []any{"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000", protocol.StatusSucceeded,
		nil, nil, "", false, nil, nil, "succeeded", "", nil, true, int64(1), 1}
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

// TestRecordNotifiesAfterItsCommit pins the measured optimisation of the record's
// commit: the record's own transaction sends no settle notification (a notifying
// transaction holds Postgres's global notification lock through its commit's WAL flush,
// which made concurrent records commit one at a time), and Report sends it after the
// commit, with the payload the settle trigger sends. A status change made any other way
// still notifies from the trigger.
func TestRecordNotifiesAfterItsCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newWalkEnv(t)
	listener, err := e.pool.Acquire(ctx)
	require.NoError(t, err)
	defer listener.Release()
	_, err = listener.Exec(ctx, "LISTEN oncebox_op_settled")
	require.NoError(t, err)
	// The channel is the database's, shared with the other tests' schemas: next waits
	// for a notification about one of this test's ops (their keys are unique) and skips
	// the others.
	next := func(within time.Duration) (string, bool) {
		wctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		for {
			n, err := listener.Conn().WaitForNotification(wctx)
			if err != nil {
				require.ErrorIs(t, err, context.DeadlineExceeded)
				return "", false
			}
			if strings.Contains(n.Payload, ":notify-") {
				return n.Payload, true
			}
		}
	}
	uniqueKey := func(id string) string {
		var key string
		require.NoError(t, e.pool.QueryRow(ctx, `UPDATE oncebox_op SET idempotency_key = 'notify-' || gen_random_uuid()
			WHERE id = $1 RETURNING idempotency_key`, id).Scan(&key))
		return key
	}

	for _, beforeJobComplete := range []bool{true, false} {
		id, token := e.seedOp(t, protocol.StatusDispatching)
		key := uniqueKey(id)
		var a *Applied
		require.NoError(t, pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			var err error
			a, err = e.m.RecordAndFinish(ctx, tx, Record{Ident: Ident{ID: id, TenantID: e.tenant, Key: key, Vendor: "fake", Attempts: 1},
				Token: token, To: protocol.StatusSucceeded, Outcome: "succeeded"}, beforeJobComplete)
			return err
		}))
		require.NotNil(t, a)
		payload, ok := next(300 * time.Millisecond)
		require.False(t, ok, "the record's transaction notified %q at its commit", payload)
		a.Report()
		payload, ok = next(10 * time.Second)
		require.True(t, ok, "Report sent no notification")
		require.Equal(t, fmt.Sprintf("%d:%s", e.tenant, key), payload)
	}

	// Any other status change still notifies from the trigger, at its commit.
	id, _ := e.seedOp(t, protocol.StatusUnknown)
	uniqueKey(id)
	_, err = e.pool.Exec(ctx, `UPDATE oncebox_op SET status = 'failed' WHERE id = $1`, id)
	require.NoError(t, err)
	_, ok := next(10 * time.Second)
	require.True(t, ok, "a status change by hand sent no notification")
}
