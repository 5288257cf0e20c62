package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestCleanRunRescuedIsFenced pins the fence of a clean run (one that calls its vendor
// with no claim commit, River's fetch being the claim): while the run is inside its
// vendor call, its job is rescued (River's job row is no longer this run: retryable, as
// the rescuer leaves it). Its answer must then not be recorded; the job's next run is
// not clean, treats the op as possibly sent, and resends inside the key window under
// the same key, which replays the first answer: one effect. Removing the job-row check
// from the clean record (sqlRecordClean) fails this test with batched completion (the
// default: the record is its own statement; with JobCompleteTx, River's refusal to
// complete a job that is not running also rolls the record back).
func TestCleanRunRescuedIsFenced(t *testing.T) {
	t.Parallel()
	for _, batched := range []bool{true, false} {
		t.Run(fmt.Sprintf("batched=%t", batched), func(t *testing.T) {
			t.Parallel()
			testCleanRunRescuedIsFenced(t, batched)
		})
	}
}

func testCleanRunRescuedIsFenced(t *testing.T, batched bool) {
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")

	release := make(chan struct{})
	fake.SetBlock(release)
	effected := make(chan struct{}, 10)
	fake.EffectHook(func(fakewebhook.Effect) { effected <- struct{}{} })

	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true, ClientID: "a", RetryBackoff: 2 * time.Second, Batched: batched})
	optest.Start(t, ob)
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "rescued", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	select {
	case <-effected:
	case <-time.After(15 * time.Second):
		t.Fatal("the worker never reached the vendor")
	}
	// A clean run: nothing was committed before the call.
	require.Equal(t, string(protocol.StatusPending), opStatus(t, pool, res.Op.ID))
	require.Zero(t, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_attempt WHERE op_id = $1", res.Op.ID))

	// The rescuer takes the job (as after RescueStuckJobsAfter): retryable, its attempt
	// kept, due only after the run has tried to record.
	_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'retryable', scheduled_at = now() + interval '3 seconds'
		WHERE args->>'op_id' = $1`, res.Op.ID)
	require.NoError(t, err)
	fake.SetBlock(nil)
	close(release)

	op := optest.WaitKeyStatus(t, ob, tenant, "rescued", protocol.StatusSucceeded, 30*time.Second)
	require.Equal(t, 1, fake.EffectCount(), "one vendor effect")
	require.Equal(t, fake.EffectsFor(res.Op.ID)[0].ID, op.VendorRef)
	h, err := ob.History(ctx, tenant, op.ID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(h.Attempts), 2, "%+v", h.Attempts)
	require.Equal(t, "lost", h.Attempts[0].Outcome,
		"the rescued run's answer was recorded: the clean record did not check the job row (%+v)", h.Attempts)
	require.Equal(t, "succeeded", h.Attempts[len(h.Attempts)-1].Outcome)
	require.Equal(t, 2, fake.Requests(), "the next run resent under the same key, once")
}

// TestUncleanRunDoesNotSendOutsideTheKeyWindow: a pending op whose job already ran
// once without its answer being recorded (River's job row is at attempt 1, the op heard
// no run) may have been sent. For a target that does not deduplicate keys, the job's
// next run must not send: the op goes to the reconciler (unknown), with the unheard run
// counted as a lost attempt. Treating every pending op as clean fails this test.
func TestUncleanRunDoesNotSendOutsideTheKeyWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.PlainTarget(t)
	tenant := optest.Tenant(t, pool, "acme")

	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{ClientID: "a"})
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "unheard", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	// A run of the job happened (a worker killed after its call, then rescued).
	_, err = pool.Exec(ctx, `UPDATE river_job SET attempt = 1, attempted_at = now() - interval '3 minutes'
		WHERE args->>'op_id' = $1`, res.Op.ID)
	require.NoError(t, err)
	optest.Start(t, ob)

	optest.WaitKeyStatus(t, ob, tenant, "unheard", protocol.StatusUnknown, 20*time.Second)
	waitJobsFinished(t, pool, res.Op.ID)
	require.Zero(t, fake.Requests(), "an unclean run sent outside the key window")
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op_event WHERE op_id = $1 AND kind = 'predecessor_unheard'", res.Op.ID))
	h, err := ob.History(ctx, tenant, res.Op.ID)
	require.NoError(t, err)
	require.Len(t, h.Attempts, 1)
	require.Equal(t, "lost", h.Attempts[0].Outcome)
}

// TestCleanRunRecordsFromPending: the common case writes nothing before the call and
// records the answer straight from pending, with its attempt row and the run it heard,
// and with batched completion (the default) deletes its job's row in the same statement.
func TestCleanRunRecordsFromPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, srv := optest.PlainTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{ClientID: "a", Batched: true})
	optest.Start(t, ob)
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "clean", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	op := optest.WaitKeyStatus(t, ob, tenant, "clean", protocol.StatusSucceeded, 20*time.Second)
	require.Equal(t, 1, op.Attempts)
	require.NotNil(t, op.DispatchStartedAt)
	var heardJob int64
	var heardAttempt int
	require.NoError(t, pool.QueryRow(ctx, "SELECT heard_job_id, heard_job_attempt FROM oncebox_op WHERE id = $1", res.Op.ID).
		Scan(&heardJob, &heardAttempt))
	require.Equal(t, 1, heardAttempt)
	// The record that made the op terminal deleted its job's row: River's completer had
	// nothing left to write.
	require.Zero(t, dbtest.Count(t, pool, "SELECT count(*) FROM river_job WHERE id = $1", heardJob))
	h, err := ob.History(ctx, tenant, op.ID)
	require.NoError(t, err)
	require.Len(t, h.Attempts, 1)
	require.Equal(t, "succeeded", h.Attempts[0].Outcome)
	require.Equal(t, heardJob, h.Attempts[0].JobID)
}

// TestSnoozedRerunLostIsNotClean: a run records a 429 and snoozes its job (Retry-After),
// so River runs the job again at the same attempt number; that rerun acts at the
// target and its answer is lost (its job is rescued, as after a kill). The run after it
// must not be clean: the target does not deduplicate keys, so the op goes to the
// reconciler with one effect, never a second send. Storing the snoozing run's own
// attempt as heard (a rerun at the same number then makes the next attempt look
// clean) fails this test; it is how the chaos run found a duplicate.
func TestSnoozedRerunLostIsNotClean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.PlainTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault429, RetryAfter: time.Second})
	release := make(chan struct{})
	fake.SetBlock(release)
	effected := make(chan struct{}, 10)
	fake.EffectHook(func(fakewebhook.Effect) { effected <- struct{}{} })

	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{ClientID: "a", RetryBackoff: 2 * time.Second})
	optest.Start(t, ob)
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "snoozed", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	select {
	case <-effected:
	case <-time.After(20 * time.Second):
		t.Fatal("the snoozed rerun never reached the target")
	}
	require.Equal(t, 2, fake.Requests(), "a 429, then the rerun")
	// The rerun is inside its call; its job is rescued.
	_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'retryable', scheduled_at = now() + interval '3 seconds'
		WHERE args->>'op_id' = $1`, res.Op.ID)
	require.NoError(t, err)
	fake.SetBlock(nil)
	close(release)

	optest.WaitKeyStatus(t, ob, tenant, "snoozed", protocol.StatusUnknown, 30*time.Second)
	waitJobsFinished(t, pool, res.Op.ID)
	require.Equal(t, 1, fake.EffectCount(), "one effect")
	require.Equal(t, 2, fake.Requests(), "the run after the lost rerun sent again")
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op_event WHERE op_id = $1 AND kind = 'predecessor_unheard'", res.Op.ID))
}
