package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

// TestPendingOpsWithoutAJob: a pending op whose River job was deleted (River UI) gets a
// new one and is dispatched once; since the deleted job may have called the vendor
// without its answer being recorded, the new job treats the op as possibly sent (this
// target does not deduplicate keys: unknown, then the reconciler's lookup finds nothing
// and resends). One whose job was discarded or cancelled goes to needs_review with the
// reason; one with a live job is left alone. One whose latest job completed after a run
// the op heard, and whose earlier job was discarded, gets a new one: the latest job
// counts, and it called nothing unheard.
func TestPendingOpsWithoutAJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{StuckMargin: time.Second})

	deleted := e.Enqueue(t, "deleted", "webhook.post", optest.HookArgs(1))
	discarded := e.Enqueue(t, "discarded", "webhook.post", optest.HookArgs(2))
	cancelled := e.Enqueue(t, "cancelled", "webhook.post", optest.HookArgs(3))
	live := e.Enqueue(t, "live", "webhook.post", optest.HookArgs(4))
	completed := e.Enqueue(t, "completed", "webhook.post", optest.HookArgs(5))
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := e.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec("DELETE FROM river_job WHERE args->>'op_id' = $1", deleted.ID)
	exec(`UPDATE river_job SET state = 'discarded', finalized_at = now(), attempt = 15,
		errors = ARRAY['{"attempt":15,"error":"vendor \"webhook\" is not configured in this process"}'::jsonb] WHERE args->>'op_id' = $1`, discarded.ID)
	exec("UPDATE river_job SET state = 'cancelled', finalized_at = now() WHERE args->>'op_id' = $1", cancelled.ID)
	exec("UPDATE river_job SET state = 'discarded', finalized_at = now(), attempt = 25 WHERE args->>'op_id' = $1", completed.ID)
	exec(`INSERT INTO river_job (args, attempt, attempted_at, finalized_at, kind, max_attempts, queue, state, unique_key, unique_states)
		SELECT args, 1, now(), now(), kind, max_attempts, queue, 'completed', unique_key, unique_states FROM river_job WHERE args->>'op_id' = $1`, completed.ID)
	exec(`UPDATE oncebox_op SET heard_job_id = (SELECT max(id) FROM river_job WHERE args->>'op_id' = $1::text), heard_job_attempt = 1
		WHERE id = $1`, completed.ID)
	exec("UPDATE oncebox_op SET updated_at = now() - interval '1 minute'")

	st := e.Reconcile(t)
	require.Equal(t, 2, st.Rejobbed)
	require.Equal(t, 2, st.JobsDiscarded)

	require.Equal(t, protocol.StatusPending, e.Get(t, deleted.ID).Status)
	require.Equal(t, 1, e.Count(t, sqlLiveJobs, deleted.ID), "the op has a dispatch job again")
	ev := e.reconcileEvents(t, deleted.ID)
	require.Len(t, ev, 1)
	require.Equal(t, reconcile.Rejob, ev[0]["decision"])

	for _, op := range []*outbox.Op{discarded, cancelled} {
		require.Equal(t, protocol.StatusNeedsReview, e.Get(t, op.ID).Status)
		ev := e.reconcileEvents(t, op.ID)
		require.Len(t, ev, 1)
		require.Equal(t, reconcile.JobDiscarded, ev[0]["decision"])
		require.Contains(t, ev[0]["reason"], "its dispatch job was")
	}
	require.Contains(t, e.reconcileEvents(t, discarded.ID)[0]["reason"], "is not configured in this process")
	// The discarded job ran (15 attempts) and the op heard none of them: one may have
	// called the vendor; the cancelled one never ran.
	require.Contains(t, e.reconcileEvents(t, discarded.ID)[0]["reason"], "without its answer being recorded")
	require.NotContains(t, e.reconcileEvents(t, cancelled.ID)[0]["reason"], "without its answer being recorded")
	require.Equal(t, 1, e.Count(t, "SELECT count(*) FROM oncebox_op WHERE id = $1 AND heard_job_id = -1", discarded.ID),
		"a release for resend of the discarded op must treat it as possibly sent")

	require.Equal(t, protocol.StatusPending, e.Get(t, completed.ID).Status)
	ev = e.reconcileEvents(t, completed.ID)
	require.Len(t, ev, 1)
	require.Equal(t, reconcile.Rejob, ev[0]["decision"])
	require.Equal(t, "its dispatch job completed while the op was pending", ev[0]["reason"])

	require.Equal(t, protocol.StatusPending, e.Get(t, live.ID).Status)
	require.Equal(t, 1, e.Count(t, "SELECT count(*) FROM river_job WHERE args->>'op_id' = $1", live.ID), "a live job is left alone")
	require.Empty(t, e.reconcileEvents(t, live.ID))

	// A second sweep changes nothing: every pending op has its job.
	st = e.Reconcile(t)
	require.Zero(t, st.Rejobbed+st.JobsDiscarded)

	e.Start(t)
	e.WaitStatus(t, deleted.ID, protocol.StatusUnknown)
	require.Equal(t, 1, e.Count(t, "SELECT count(*) FROM oncebox_op_event WHERE op_id = $1 AND kind = 'predecessor_unheard'", deleted.ID))
	require.Empty(t, fake.EffectsFor(deleted.ID), "the new job sent an op that may have been sent, to a target that does not deduplicate")
	require.Eventually(t, func() bool {
		e.Reconcile(t)
		return e.Get(t, deleted.ID).Status != protocol.StatusUnknown
	}, 20*time.Second, 200*time.Millisecond, "the reconciler never resent the op")
	e.WaitStatus(t, deleted.ID, protocol.StatusSucceeded)
	e.WaitStatus(t, live.ID, protocol.StatusSucceeded)
	require.Len(t, fake.EffectsFor(deleted.ID), 1, "dispatched once")
}
