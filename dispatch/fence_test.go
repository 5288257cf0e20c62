package dispatch_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestStaleTokenIsFencedByTheToken pins the attempt-token fence on its own: while a
// worker is inside its vendor call, a newer attempt takes the op over (a new token)
// and leaves it in a status the record statement accepts (dispatching, or unknown
// after that newer attempt lost its answer). The stale worker's answer must then be
// refused by the token alone, and its run must not complete the job. Removing
// `AND attempt_token = …` from the record statement fails this test whatever the
// status condition says; so does completing the job of a fenced run.
func TestStaleTokenIsFencedByTheToken(t *testing.T) {
	t.Parallel()
	for _, newer := range []protocol.Status{protocol.StatusDispatching, protocol.StatusUnknown} {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batched=%t", newer, batched), func(t *testing.T) {
				t.Parallel()
				testStaleTokenIsFenced(t, newer, batched)
			})
		}
	}
}

func testStaleTokenIsFenced(t *testing.T, newer protocol.Status, batched bool) {
	ctx := context.Background()
	pool := dbtest.Schema(t)
	// A target that does not deduplicate keys: a job that finds its op still
	// dispatching may not resend, it hands the op to the reconciler.
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	tenant := optest.Tenant(t, pool, "acme")

	release := make(chan struct{})
	fake.SetBlock(release)
	effected := make(chan struct{}, 10)
	fake.EffectHook(func(fakewebhook.Effect) { effected <- struct{}{} })

	stale := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{ClientID: "stale", Batched: batched, ClaimCommit: true})
	optest.Start(t, stale)
	res, err := stale.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "fenced", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	opID := res.Op.ID
	select {
	case <-effected:
	case <-time.After(15 * time.Second):
		t.Fatal("the worker never reached the vendor")
	}

	// The worker is inside the vendor call under its token. A newer attempt takes
	// the op over: a fresh token, its own attempt row, and the status it left. Its
	// start is dated past the job timeout, so that a job finding the op dispatching
	// takes it over at once instead of waiting for the newer attempt to end.
	var staleToken, newToken string
	require.NoError(t, pool.QueryRow(ctx, "SELECT attempt_token::text FROM oncebox_op WHERE id = $1", opID).Scan(&staleToken))
	require.NoError(t, pool.QueryRow(ctx, `UPDATE oncebox_op SET status = $2, attempt_token = gen_random_uuid(),
		attempts = attempts + 1, dispatch_started_at = now() - interval '1 minute', updated_at = now()
		WHERE id = $1 RETURNING attempt_token::text`, opID, string(newer)).Scan(&newToken))
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at)
		SELECT id, attempts, attempt_token, vendor_key, dispatch_started_at FROM oncebox_op WHERE id = $1`, opID)
	require.NoError(t, err)
	require.NotEqual(t, staleToken, newToken)

	// The stale worker gets its answer (a success) and tries to record it.
	fake.SetBlock(nil)
	close(release)
	require.Eventually(t, func() bool {
		var outcome *string
		err := pool.QueryRow(ctx, "SELECT outcome FROM oncebox_attempt WHERE op_id = $1 AND token = $2::uuid", opID, staleToken).Scan(&outcome)
		return err == nil && outcome != nil
	}, 15*time.Second, 10*time.Millisecond, "the stale worker never closed its attempt")

	var (
		status, token string
		result        *string
		vendorRef     *string
		outcome       string
	)
	require.NoError(t, pool.QueryRow(ctx, "SELECT status, attempt_token::text, result::text, vendor_ref FROM oncebox_op WHERE id = $1", opID).
		Scan(&status, &token, &result, &vendorRef))
	require.NoError(t, pool.QueryRow(ctx, "SELECT outcome FROM oncebox_attempt WHERE op_id = $1 AND token = $2::uuid", opID, staleToken).Scan(&outcome))
	require.Equal(t, "fenced:succeeded", outcome, "the stale answer must be refused by the attempt token")
	require.Equal(t, string(newer), status, "the stale answer overwrote the newer attempt's status")
	require.Equal(t, newToken, token, "the newer attempt's token must survive")
	require.Nil(t, result, "the stale answer's result was recorded")
	require.True(t, vendorRef == nil || *vendorRef == "", "the stale answer's vendor_ref was recorded: %v", vendorRef)
	require.Equal(t, 1, fake.EffectCount())

	if newer == protocol.StatusDispatching {
		// The fenced run did not complete its job: the job runs again, finds the op
		// still dispatching under the newer token, and (this vendor does not
		// deduplicate) hands it to the reconciler. Had the fenced run completed the
		// job, nothing would ever look at the op again.
		require.Eventually(t, func() bool {
			return dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op_event WHERE op_id = $1 AND kind = 'predecessor_lost'", opID) == 1
		}, 20*time.Second, 20*time.Millisecond, "the fenced run's job never ran again: it was completed by the fenced run")
		require.Equal(t, string(protocol.StatusUnknown), opStatus(t, pool, opID))
		require.Equal(t, 1, fake.Requests(), "nothing was resent")
	}
}

func opStatus(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, opID string) string {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT status FROM oncebox_op WHERE id = $1", opID).Scan(&s))
	return s
}

// waitJobsFinished waits until no dispatch job of the op can run again (each one
// completed, discarded or cancelled): from then on nothing more can be sent for it,
// so a check that nothing more was sent proves something without sleeping.
func waitJobsFinished(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, opID string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var open int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE args->>'op_id' = $1
			AND state NOT IN ('completed', 'discarded', 'cancelled')`, opID).Scan(&open)
		return err == nil && open == 0
	}, 15*time.Second, 20*time.Millisecond, "the op's dispatch job never finished")
}
