package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestReleaseWaitsForAFinishedRun: with batched completion (the default) a run that
// recorded its answer returns, and its job stays running until River's completer
// finishes it. A person's release for resend in that moment is deduplicated against
// that job (one live job per op), which will not look at the op again: the release
// must wait for it and give the op a job of its own, instead of leaving the op to the
// sweeper. Inserting the release's job once, as an enqueue does, fails this test.
func TestReleaseWaitsForAFinishedRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, srv := optest.PlainTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Batched: true})
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "released", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)

	// The job's first run recorded unknown and returned; the completer has not run yet.
	var jobID int64
	require.NoError(t, pool.QueryRow(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now()
		WHERE args->>'op_id' = $1 RETURNING id`, res.Op.ID).Scan(&jobID))
	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET status = 'unknown', attempts = 1, heard_job_id = $2, heard_job_attempt = 1
		WHERE id = $1`, res.Op.ID, jobID)
	require.NoError(t, err)
	completed := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, err := pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id = $1`, jobID)
		completed <- err
	}()

	a, err := ob.OpsForTest().ApplyTx(ctx, opstate.Change{OpID: res.Op.ID, From: protocol.StatusUnknown, To: protocol.StatusPending,
		By: opstate.Person, Action: opstate.Release, Actor: "alice", Kind: "resolve"})
	require.NoError(t, err)
	require.NotNil(t, a)
	require.NoError(t, <-completed)
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM river_job WHERE args->>'op_id' = $1 AND id <> $2
		AND state IN ('available', 'scheduled')`, res.Op.ID, jobID), "the released op has no dispatch job of its own")

	// And it is dispatched.
	optest.Start(t, ob)
	optest.WaitKeyStatus(t, ob, tenant, "released", protocol.StatusSucceeded, 20*time.Second)
}
