package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

// TestCleanDispatchesLeaveNothingToSweep: a clean dispatch (the first run of a fresh
// op) puts nothing on the sweeper's due list and sets neither review_since nor a next
// check, the columns whose partial indexes replace the status indexes (migration 036):
// a clean dispatch's update of the op row changes none of them.
func TestCleanDispatchesLeaveNothingToSweep(t *testing.T) {
	t.Parallel()
	fake, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{StuckMargin: time.Second})
	var ids []string
	for i := range 5 {
		ids = append(ids, e.Enqueue(t, "clean-"+string(rune('a'+i)), protocol.ToolWebhookPost, optest.HookArgs(i)).ID)
	}
	e.Start(t)
	for _, id := range ids {
		e.WaitStatus(t, id, protocol.StatusSucceeded)
	}
	require.Equal(t, 5, fake.EffectCount())
	require.Zero(t, e.Count(t, "SELECT count(*) FROM oncebox_op_due"))
	require.Zero(t, e.Count(t, "SELECT count(*) FROM oncebox_op WHERE review_since IS NOT NULL OR next_check_at IS NOT NULL"))
}

// TestADueEntryRewrittenMeanwhileStays: the sweeper removes an entry it looked at only
// if no trigger rewrote it since. Here a job is rescued (the op enters the due list),
// the sweeper reads the entry while the job is live, the job is then cancelled (the
// trigger rewrites the entry), and the sweeper's delete with the version it read
// leaves the entry: the next sweep hands the op to a person.
func TestADueEntryRewrittenMeanwhileStays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{StuckMargin: time.Second})
	op := e.Enqueue(t, "rescued", protocol.ToolWebhookPost, optest.HookArgs(1))
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := e.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	require.Zero(t, e.Count(t, "SELECT count(*) FROM oncebox_op_due"), "a fresh op is not due")
	exec("UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE args->>'op_id' = $1", op.ID)
	exec("UPDATE river_job SET state = 'retryable' WHERE args->>'op_id' = $1", op.ID)
	var version string
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT xmin::text FROM oncebox_op_due WHERE op_id = $1", op.ID).Scan(&version))

	exec("UPDATE river_job SET state = 'cancelled', finalized_at = now() WHERE args->>'op_id' = $1", op.ID)
	tag, err := e.Pool.Exec(ctx, reconcile.SQLDueDone, []string{op.ID}, []string{version})
	require.NoError(t, err)
	require.Zero(t, tag.RowsAffected(), "the entry was rewritten after it was read")

	exec("UPDATE oncebox_op SET updated_at = now() - interval '1 minute' WHERE id = $1", op.ID)
	st := e.Reconcile(t)
	require.Equal(t, 1, st.JobsDiscarded)
	require.Equal(t, protocol.StatusNeedsReview, e.Get(t, op.ID).Status)
	require.Zero(t, e.Count(t, "SELECT count(*) FROM oncebox_op_due"), "looked at and done")
}

// TestOlderBinariesWritesFeedTheNewShapes: during a rolling upgrade a v0.1.0 binary
// changes an op's status the way it always did, with no idea of review_since, the due
// list or a next check for every unknown op; the triggers of migration 036 keep all
// three true, so the v0.2.0 sweeper and review list find what v0.1.0 wrote.
func TestOlderBinariesWritesFeedTheNewShapes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake, srv, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{StuckMargin: time.Second})
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := e.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	unknown := e.Enqueue(t, "unknown", protocol.ToolWebhookPost, optest.HookArgs(1))
	review := e.Enqueue(t, "review", protocol.ToolWebhookPost, optest.HookArgs(2))
	claimed := e.Enqueue(t, "claimed", protocol.ToolWebhookPost, optest.HookArgs(3))
	exec("DELETE FROM river_job WHERE args->>'op_id' = ANY($1::text[])", []string{unknown.ID, review.ID, claimed.ID})
	exec("DELETE FROM oncebox_op_due")

	// v0.1.0's stuck-op update: unknown with no next check (due at once).
	exec(`UPDATE oncebox_op SET status = 'unknown', attempts = 1, attempt_token = gen_random_uuid(), next_check_at = NULL,
		dispatch_started_at = now() - interval '1 minute' WHERE id = $1`, unknown.ID)
	require.Equal(t, 1, e.Count(t, "SELECT count(*) FROM oncebox_op WHERE id = $1 AND next_check_at <= now()", unknown.ID))
	// v0.1.0's review update.
	exec("UPDATE oncebox_op SET status = 'needs_review', updated_at = now() WHERE id = $1", review.ID)
	items, err := e.Ob.ListReview(ctx, e.Tenant)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, review.ID, items[0].OpID)
	// v0.1.0's claim on the locking path, whose worker then died with its job gone.
	exec(`UPDATE oncebox_op SET status = 'dispatching', attempts = 1, attempt_token = gen_random_uuid(),
		dispatch_started_at = now() - interval '1 minute' WHERE id = $1`, claimed.ID)
	require.Equal(t, 1, e.Count(t, "SELECT count(*) FROM oncebox_op_due WHERE op_id = $1", claimed.ID))
	postEffect(t, srv.URL, unknown.ID)

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Stuck, "the claimed op without a job is stuck")
	require.Equal(t, protocol.StatusSucceeded, e.Get(t, unknown.ID).Status, "the lease found the unknown op")
	require.NotEqual(t, protocol.StatusDispatching, e.Get(t, claimed.ID).Status)
	require.Zero(t, e.Count(t, "SELECT count(*) FROM oncebox_op_due"))

	// Out of review (a person's resolution, by v0.1.0): the review list forgets it.
	exec("UPDATE oncebox_op SET status = 'failed', updated_at = now() WHERE id = $1", review.ID)
	items, err = e.Ob.ListReview(ctx, e.Tenant)
	require.NoError(t, err)
	require.Empty(t, items)
	require.Equal(t, 1, fake.EffectCount(), "the unknown op's effect was adopted, not sent again")
}
