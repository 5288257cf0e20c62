package reconcile_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/steps"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestLiveJobKeyIsRiversUniqueKey: the sweep finds an op's live job by River's unique key,
// computed in SQL (reconcile.LiveJobKey), not by an index on River's args. The key must be
// the one River writes for the op's dispatch job (inserted by the Outbox) and for its step
// runner job (as steps.StartTx builds it): a River upgrade that changes how it builds
// unique keys fails here rather than making the sweep re-job ops that have a live job.
func TestLiveJobKeyIsRiversUniqueKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newSweepEnv(t, nil, reconcile.Config{})
	op := e.Enqueue(t, "k", "webhook.post", optest.HookArgs(1))

	inserter, err := river.NewClient(riverpgxv5.New(e.Pool), &river.Config{})
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, e.Pool, func(tx pgx.Tx) error {
		job, err := steps.StartTx(ctx, tx, op.ID)
		if err != nil {
			return err
		}
		_, err = inserter.InsertManyTx(ctx, tx, []river.InsertManyParams{job})
		return err
	}))

	for _, kind := range []string{"oncebox.dispatch", "oncebox.steps"} {
		require.Equal(t, 1, e.Count(t, `SELECT count(*) FROM river_job j, (SELECT $1::uuid AS id) o, (SELECT $2::text AS kind) k
			WHERE j.kind = k.kind AND j.unique_key = `+reconcile.LiveJobKey, op.ID, kind), kind)
	}
}
