package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

const sqlLiveJobs = `SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch' AND args->>'op_id' = $1
	AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')`

// TestOneLiveDispatchJobPerOp: inserting a dispatch job for an op that has a live one
// (a resend racing a rescued job) adds none; once the job is finished, a new one may be
// inserted.
func TestOneLiveDispatchJobPerOp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	tenant := optest.Tenant(t, e.pool, "acme")
	res, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "test.echo", Args: []byte(`{"n":1}`)})
	require.NoError(t, err)
	insert := func() {
		t.Helper()
		require.NoError(t, pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			return e.ob.InsertJobTxForTest(ctx, tx, res.Op.ID, "echo")
		}))
	}
	for _, state := range []string{"available", "running", "retryable", "scheduled"} {
		_, err = e.pool.Exec(ctx, "UPDATE river_job SET state = $2 WHERE args->>'op_id' = $1", res.Op.ID, state)
		require.NoError(t, err)
		insert()
		require.Equal(t, 1, dbtest.Count(t, e.pool, sqlLiveJobs, res.Op.ID), "a second live job was inserted next to a %s one", state)
	}
	_, err = e.pool.Exec(ctx, "UPDATE river_job SET state = 'completed', finalized_at = now() WHERE args->>'op_id' = $1", res.Op.ID)
	require.NoError(t, err)
	insert()
	require.Equal(t, 1, dbtest.Count(t, e.pool, sqlLiveJobs, res.Op.ID), "a finished job does not keep the op from a new one")
	require.Equal(t, 2, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job WHERE args->>'op_id' = $1", res.Op.ID))
}

// TestTakeoverWaitsForTheAttemptsJobTimeout: a job that finds its op dispatching under
// an attempt that started less than a job timeout ago (a live run, not a dead one) does
// not take it over: it does not close the attempt as lost, does not hand the op to the
// reconciler, does not send; it looks again once the attempt must be over.
func TestTakeoverWaitsForTheAttemptsJobTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newSchema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{JobTimeout: 20 * time.Second})
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	// Another run claimed the op a moment ago and is still waiting for the receiver.
	_, err = pool.Exec(ctx, `WITH c AS (
		UPDATE oncebox_op SET status = 'dispatching', attempts = 1, attempt_token = gen_random_uuid(),
			dispatch_started_at = now(), key_first_sent_at = now() WHERE id = $1
		RETURNING id, attempt_token, vendor_key, dispatch_started_at)
		INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at)
		SELECT id, 1, attempt_token, vendor_key, dispatch_started_at FROM c`, res.Op.ID)
	require.NoError(t, err)
	optest.Start(t, ob)

	require.Eventually(t, func() bool {
		return dbtest.Count(t, pool, "SELECT count(*) FROM river_job WHERE args->>'op_id' = $1 AND state = 'scheduled' AND scheduled_at > now() + interval '10 seconds'", res.Op.ID) == 1
	}, 10*time.Second, 20*time.Millisecond, "the job should wait until the live attempt's job timeout is over")
	op, err := ob.Get(ctx, tenant, "k1")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusDispatching, op.Status)
	require.Equal(t, 0, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_attempt WHERE op_id = $1 AND finished_at IS NOT NULL", res.Op.ID),
		"the live attempt was closed as lost")
	require.Equal(t, 0, fake.Requests(), "nothing may be sent while the attempt may still run")
}
