package dispatch_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// runningUnder makes the op's dispatch job look fetched a moment ago, at attempt 1, by
// the process whose River client id is clientID, as a clean run that died (or hangs)
// mid-call leaves it.
func runningUnder(t *testing.T, pool *pgxpool.Pool, opID, clientID string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(),
		attempted_by = ARRAY[$2::text] WHERE args->>'op_id' = $1`, opID, clientID)
	require.NoError(t, err)
}

// holdLiveness holds the liveness lock of clientID on a connection of its own, as a live
// process does, until the test ends.
func holdLiveness(t *testing.T, pool *pgxpool.Pool, clientID string) {
	t.Helper()
	conn, err := pgx.ConnectConfig(context.Background(), pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	var held bool
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT pg_try_advisory_lock(hashtextextended('oncebox.process:' || $1, 0))`, clientID).Scan(&held))
	require.True(t, held)
}

// TestTakeoverOfAGoneProcessAtOnce: a clean run's process died after it sent the op (its
// liveness lock is free): another process takes the job over within seconds, not after
// RescueStuckJobsAfter or the job timeout, and its resend under the same key settles
// the op with one effect at the receiver (the SIGKILL tests of cmd/oncebox kill a real
// process after the receiver acted).
func TestTakeoverOfAGoneProcessAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true, JobTimeout: 20 * time.Second, RescueAfter: time.Hour})
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	runningUnder(t, pool, res.Op.ID, dispatch.LiveClientPrefix+"gone_1")
	start := time.Now()
	optest.Start(t, ob)

	var op *outbox.Op
	require.Eventually(t, func() bool {
		op, err = ob.Get(ctx, tenant, "k1")
		return err == nil && op.Status == protocol.StatusSucceeded
	}, 10*time.Second, 50*time.Millisecond, "op: %+v", op)
	t.Logf("settled %s after the takeover started", time.Since(start))
	require.Equal(t, 1, fake.EffectCount(), "one effect at the receiver")
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM river_job WHERE args->>'op_id' = $1 AND metadata ? 'oncebox:taken_over_at'`, res.Op.ID))
}

// TestNoTakeoverOfALiveSilentProcess: a process that holds its liveness lock keeps its
// job however silent it is (paused, cut off): nobody takes the job over or sends the
// op before River's own rescue.
func TestNoTakeoverOfALiveSilentProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true, JobTimeout: 20 * time.Second, RescueAfter: time.Hour})
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	alive := dispatch.LiveClientPrefix + "alive_1"
	holdLiveness(t, pool, alive)
	runningUnder(t, pool, res.Op.ID, alive)
	optest.Start(t, ob)

	time.Sleep(4 * time.Second)
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM river_job WHERE args->>'op_id' = $1 AND state = 'running' AND attempt = 1`, res.Op.ID),
		"the live process's job was taken over")
	require.Equal(t, 0, fake.Requests(), "nothing may be sent while the live process may still be calling")
}

// TestDispatchingAttemptOfAGoneProcessIsOver: a job that finds its op dispatching under
// an attempt claimed by a process that is provably gone takes it over at once (resend
// under the same key inside the window), without waiting for the attempt's job timeout;
// the same attempt claimed by a live process is waited for
// (TestTakeoverWaitsForTheAttemptsJobTimeout).
func TestDispatchingAttemptOfAGoneProcessIsOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true, JobTimeout: 20 * time.Second, RescueAfter: time.Hour})
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `WITH c AS (
		UPDATE oncebox_op SET status = 'dispatching', attempts = 1, attempt_token = gen_random_uuid(),
			dispatch_started_at = now(), key_first_sent_at = now() WHERE id = $1
		RETURNING id, attempt_token, vendor_key, dispatch_started_at)
		INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at, worker)
		SELECT id, 1, attempt_token, vendor_key, dispatch_started_at, $2 FROM c`, res.Op.ID, dispatch.LiveClientPrefix+"gone_2")
	require.NoError(t, err)
	optest.Start(t, ob)

	var op *outbox.Op
	require.Eventually(t, func() bool {
		op, err = ob.Get(ctx, tenant, "k1")
		return err == nil && op.Status == protocol.StatusSucceeded
	}, 10*time.Second, 50*time.Millisecond, "op: %+v", op)
	require.Equal(t, 1, fake.EffectCount())
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_attempt WHERE op_id = $1 AND outcome = 'lost'", res.Op.ID))
}

// TestWokenWorkerAfterTakeoverIsFenced: a clean run that was silent while its job was
// taken over (made available again at the same attempt, as the takeover does) records
// nothing when it wakes up with the target's answer: the op stays pending, with no
// attempt, for the job's next run, which treats it as possibly sent.
func TestWokenWorkerAfterTakeoverIsFenced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake := fakewebhook.New(fakewebhook.Config{})
	release := make(chan struct{})
	fake.SetBlock(release)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	tenant := optest.Tenant(t, pool, "acme")
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{JobTimeout: 20 * time.Second, RescueAfter: time.Hour})
	optest.Start(t, ob)
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return fake.EffectCount() == 1 }, 10*time.Second, 20*time.Millisecond)

	// The takeover, while the worker waits for the answer; the job's next run is
	// held back, so that only the woken worker can touch the op.
	_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now() + interval '1 hour',
		metadata = metadata || jsonb_build_object('oncebox:taken_over_at', now()) WHERE args->>'op_id' = $1 AND state = 'running'`, res.Op.ID)
	require.NoError(t, err)
	close(release)

	// The woken worker has the answer at once; its record, were it let through, would
	// follow within milliseconds.
	time.Sleep(2 * time.Second)
	op, err := ob.Get(ctx, tenant, "k1")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusPending, op.Status, "the woken worker recorded its answer after the takeover")
	require.Equal(t, 0, op.Attempts)
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM river_job WHERE args->>'op_id' = $1 AND state = 'available'", res.Op.ID))
}

// TestStartPutsNoJobOff: a process restarted with a backlog waits for its liveness lock
// before it fetches, so that none of its first jobs is put off for lack of the lock
// (River counts each such snooze in the job's metadata). The lock is held elsewhere
// for a moment, as a session of the process's previous life lingers on the server.
func TestStartPutsNoJobOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	clientID := dispatch.LiveClientPrefix + "restarted_1"
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true, ClientID: clientID})
	const ops = 20
	for i := range ops {
		_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: fmt.Sprintf("k%d", i), Tool: "webhook.post", Args: optest.WebhookArgs(i)})
		require.NoError(t, err)
	}
	lingering, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	var held bool
	require.NoError(t, lingering.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended('oncebox.process:' || $1, 0))`, clientID).Scan(&held))
	require.True(t, held)
	time.AfterFunc(300*time.Millisecond, func() { _ = lingering.Close(context.Background()) })
	optest.Start(t, ob)
	require.Eventually(t, func() bool {
		return dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op WHERE status = 'succeeded'") == ops
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, ops, fake.EffectCount())
	require.Zero(t, dbtest.Count(t, pool, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch' AND metadata ? 'snoozes'"),
		"a job was put off while the process took its lock")
}
