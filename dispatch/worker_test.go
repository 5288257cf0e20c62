package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

const (
	childEnv       = "ONCEBOX_TEST_CHILD_WORKER"
	childDBEnv     = "ONCEBOX_TEST_CHILD_DB"
	childTargetEnv = "ONCEBOX_TEST_CHILD_TARGET"
	childNativeEnv = "ONCEBOX_TEST_CHILD_NATIVE"
)

// waitPendingWithResendDeadline waits until the op is pending again with a resend
// deadline, and returns the deadline.
func waitPendingWithResendDeadline(t *testing.T, pool *pgxpool.Pool, opID string) time.Time {
	t.Helper()
	var resendBefore *time.Time
	require.Eventually(t, func() bool {
		var status string
		err := pool.QueryRow(context.Background(), "SELECT status, resend_before FROM oncebox_op WHERE id = $1", opID).Scan(&status, &resendBefore)
		return err == nil && status == "pending" && resendBefore != nil
	}, 10*time.Second, 10*time.Millisecond, "the op did not go back to pending with a resend deadline")
	return *resendBefore
}

func TestDispatchSucceedsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true})
	optest.Start(t, ob)

	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	op := optest.WaitKeyStatus(t, ob, tenant, "k1", protocol.StatusSucceeded, 10*time.Second)
	require.Equal(t, 1, fake.EffectCount())
	eff := fake.EffectsFor(res.Op.ID)
	require.Len(t, eff, 1)
	require.Equal(t, res.Op.VendorKey, eff[0].Key, "the derived vendor key is sent as Idempotency-Key")
	require.Equal(t, eff[0].ID, op.VendorRef)
	require.NotContains(t, string(op.Result), "s3cret")

	h, err := ob.History(ctx, tenant, op.ID)
	require.NoError(t, err)
	require.Len(t, h.Attempts, 1)
	require.Equal(t, "succeeded", h.Attempts[0].Outcome)
	require.NotNil(t, h.Attempts[0].FinishedAt)

	// The job completed in the result's transaction.
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM river_job WHERE state = 'completed'"))
}

func TestDispatchOutcomeClasses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	tenant := optest.Tenant(t, pool, "acme")
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{})
	optest.Start(t, ob)

	t.Run("permanent is stored and replayed", func(t *testing.T) {
		fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultReject, Status: 422})
		_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "perm", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
		require.NoError(t, err)
		op := optest.WaitKeyStatus(t, ob, tenant, "perm", protocol.StatusFailed, 10*time.Second)
		require.Contains(t, string(op.Error), `"class":"permanent"`)
		before := fake.Requests()

		again, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "perm", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, protocol.StatusFailed, again.Op.Status)
		require.Equal(t, string(op.Error), string(again.Op.Error), "the stored refusal is replayed byte for byte")
		waitJobsFinished(t, pool, op.ID)
		require.Equal(t, before, fake.Requests(), "a replay sends nothing")
	})

	t.Run("retry-after is honoured", func(t *testing.T) {
		fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault429, RetryAfter: time.Second})
		start := time.Now()
		res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "rl", Tool: "webhook.post", Args: optest.WebhookArgs(2)})
		require.NoError(t, err)
		op := optest.WaitKeyStatus(t, ob, tenant, "rl", protocol.StatusSucceeded, 15*time.Second)
		require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "the worker waited for Retry-After")
		require.Len(t, fake.EffectsFor(res.Op.ID), 1)
		require.Equal(t, 2, op.Attempts)
	})

	t.Run("unknown is not resent", func(t *testing.T) {
		fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault500AfterEffect})
		res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "unk", Tool: "webhook.post", Args: optest.WebhookArgs(3)})
		require.NoError(t, err)
		optest.WaitKeyStatus(t, ob, tenant, "unk", protocol.StatusUnknown, 10*time.Second)
		waitJobsFinished(t, pool, res.Op.ID)
		require.Len(t, fake.EffectsFor(res.Op.ID), 1, "an unknown outcome waits for the reconciler")
		op, err := ob.Get(ctx, tenant, "unk")
		require.NoError(t, err)
		require.Equal(t, protocol.StatusUnknown, op.Status)
	})

	t.Run("retryable until attempts run out goes to review", func(t *testing.T) {
		for i := 0; i < 12; i++ {
			fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault409})
		}
		_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "busy", Tool: "webhook.post", Args: optest.WebhookArgs(4)})
		require.NoError(t, err)
		op := optest.WaitKeyStatus(t, ob, tenant, "busy", protocol.StatusNeedsReview, 20*time.Second)
		require.Equal(t, 10, op.Attempts)
		require.True(t, op.NothingSent(), "every attempt was refused before the target acted: %s", op.Error)
	})
}

// TestRescuedDuplicateIsFenced runs the same op in two worker processes at once, as when
// River rescues a job whose worker is slow rather than dead: one vendor effect, one
// recorded result, and the loser's write refused by the attempt token.
func TestRescuedDuplicateIsFenced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")

	release := make(chan struct{})
	fake.SetBlock(release)
	effected := make(chan struct{}, 10)
	fake.EffectHook(func(fakewebhook.Effect) { effected <- struct{}{} })

	a := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true, ClientID: "a", ClaimCommit: true})
	optest.Start(t, a)
	res, err := a.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "dup", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	select {
	case <-effected:
	case <-time.After(10 * time.Second):
		t.Fatal("worker a never reached the vendor")
	}

	// Worker a is inside the vendor call. Make its job available again, as the rescuer
	// would, and let worker b run it concurrently. The rescuer comes only after the job
	// timeout (before it, b would wait for a's attempt): the attempt is made to look
	// that old.
	_, err = pool.Exec(ctx, "UPDATE river_job SET state = 'available', scheduled_at = now() WHERE args->>'op_id' = $1", res.Op.ID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE oncebox_op SET dispatch_started_at = dispatch_started_at - interval '1 minute' WHERE id = $1", res.Op.ID)
	require.NoError(t, err)
	b := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true, ClientID: "b", ClaimCommit: true})
	optest.Start(t, b)

	// b sees the op dispatching within the key window and resends with the same key; the
	// vendor answers 409 (the key is in flight), so b sets the op back to pending.
	require.Eventually(t, func() bool { return fake.Requests() >= 2 }, 10*time.Second, 10*time.Millisecond)
	fake.SetBlock(nil)
	close(release)

	op := optest.WaitKeyStatus(t, a, tenant, "dup", protocol.StatusSucceeded, 15*time.Second)
	require.Equal(t, 1, fake.EffectCount(), "one vendor effect")
	require.Len(t, fake.EffectsFor(res.Op.ID), 1)
	require.Equal(t, fake.EffectsFor(res.Op.ID)[0].ID, op.VendorRef)

	h, err := a.History(ctx, tenant, op.ID)
	require.NoError(t, err)
	var fenced, succeeded int
	for _, at := range h.Attempts {
		switch at.Outcome {
		case "fenced:succeeded":
			fenced++
		case "succeeded":
			succeeded++
		}
	}
	require.Equal(t, 1, fenced, "the first run's late answer was refused by the attempt token: %+v", h.Attempts)
	require.Equal(t, 1, succeeded, "exactly one recorded result: %+v", h.Attempts)
}

// TestWorkerKilledAfterVendorActed kills a real worker process (SIGKILL) after the vendor
// acted but before the result was committed; a new worker finishes the op.
func TestWorkerKilledAfterVendorActed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	t.Parallel()
	for _, native := range []bool{true, false} {
		t.Run(fmt.Sprintf("native=%v", native), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := dbtest.Schema(t)
			fake := fakewebhook.New(fakewebhook.Config{HonourKeys: native})
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)
			tenant := optest.Tenant(t, pool, "acme")

			release := make(chan struct{})
			fake.SetBlock(release)
			effected := make(chan struct{}, 10)
			fake.EffectHook(func(fakewebhook.Effect) { effected <- struct{}{} })

			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), childEnv+"=1", childDBEnv+"="+dbtest.ConnString(t, pool),
				childTargetEnv+"="+srv.URL, childNativeEnv+"="+strconv.FormatBool(native))
			child.Stdout, child.Stderr = os.Stderr, os.Stderr
			require.NoError(t, child.Start())
			t.Cleanup(func() { _ = child.Process.Kill(); _, _ = child.Process.Wait() })

			// Insert-only enqueue from the test process.
			ins := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: native})
			res, err := ins.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "kill", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
			require.NoError(t, err)

			select {
			case <-effected:
			case <-time.After(20 * time.Second):
				t.Fatal("the child worker never reached the vendor")
			}
			require.NoError(t, child.Process.Signal(syscall.SIGKILL))
			_, _ = child.Process.Wait()
			fake.SetBlock(nil)
			close(release)
			require.Equal(t, 1, fake.EffectCount())

			// A new worker with a short rescue horizon takes over: River rescues the
			// job, which finds the op still dispatching.
			time.Sleep(3 * time.Second)
			_, _ = pool.Exec(ctx, "DELETE FROM river_leader") // the dead process's leadership
			next := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: native, RescueAfter: 2 * time.Second, JobTimeout: time.Second, ClientID: "next"})
			optest.Start(t, next)

			if native {
				op := optest.WaitKeyStatus(t, next, tenant, "kill", protocol.StatusSucceeded, 60*time.Second)
				require.Equal(t, fake.EffectsFor(res.Op.ID)[0].ID, op.VendorRef, "the same-key resend returned the stored answer")
			} else {
				optest.WaitKeyStatus(t, next, tenant, "kill", protocol.StatusUnknown, 60*time.Second)
				waitJobsFinished(t, pool, res.Op.ID)
			}
			require.Equal(t, 1, fake.EffectCount(), "exactly one side effect at the vendor")
			h, err := next.History(ctx, tenant, res.Op.ID)
			require.NoError(t, err)
			require.NotEmpty(t, h.Attempts)
			require.Equal(t, "lost", h.Attempts[0].Outcome, "the killed worker's attempt is closed, not left running")
			require.NotNil(t, h.Attempts[0].FinishedAt)
		})
	}
}

// runChildWorker is the body of a child worker process.
func runChildWorker() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv(childDBEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	native, _ := strconv.ParseBool(os.Getenv(childNativeEnv))
	ob := optest.NewWorkerOutbox(nil, pool, os.Getenv(childTargetEnv), optest.WorkerOpts{Native: native, RescueAfter: 2 * time.Second, JobTimeout: time.Second, ClientID: "child"})
	if err := ob.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	<-ctx.Done()
	_ = ob.Stop(context.Background())
}

// TestLostAnswerOutsideTheKeyWindowIsUnknown: a vendor that deduplicates keys has
// forgotten one first sent 25 hours ago, so a lost answer is not resent but left to the
// reconciler.
func TestLostAnswerOutsideTheKeyWindowIsUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true})
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "old-key", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE oncebox_op SET key_first_sent_at = now() - interval '25 hours' WHERE id = $1", res.Op.ID)
	require.NoError(t, err)
	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect})
	require.NoError(t, ob.Start(ctx))
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })

	var op *outbox.Op
	require.Eventually(t, func() bool {
		op, err = ob.Get(ctx, tenant, "old-key")
		return err == nil && op.Status == protocol.StatusUnknown
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, op.Attempts, "not resent")
	require.Equal(t, 1, fake.Requests())
	require.Equal(t, 1, fake.EffectCount())
}

// TestUnansweredResendRespectsTheKeyWindow: a lost answer from a vendor that
// deduplicates keys sends the op back to pending with a resend deadline (the end of
// the key window). A retry that runs only after it (a long backoff, a dead worker) must
// not send again: the op goes to the reconciler, and the vendor saw one request.
func TestUnansweredResendRespectsTheKeyWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect})
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true, RetryBackoff: 3 * time.Second})
	optest.Start(t, ob)
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "late", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)

	// The lost answer: pending again, resendable until the end of the key window.
	resendBefore := waitPendingWithResendDeadline(t, pool, res.Op.ID)
	require.WithinDuration(t, time.Now().Add(24*time.Hour-time.Minute), resendBefore, time.Minute)
	h, err := ob.History(ctx, tenant, res.Op.ID)
	require.NoError(t, err)
	require.Equal(t, "unanswered", h.Attempts[0].Outcome)

	// The retry comes only after the window (as after a long outage).
	_, err = pool.Exec(ctx, "UPDATE oncebox_op SET resend_before = now() - interval '1 second' WHERE id = $1", res.Op.ID)
	require.NoError(t, err)
	op := optest.WaitKeyStatus(t, ob, tenant, "late", protocol.StatusUnknown, 20*time.Second)
	require.Equal(t, 1, op.Attempts, "not resent")
	require.Equal(t, 1, fake.Requests())
	require.Equal(t, 1, fake.EffectCount())
	h, err = ob.History(ctx, tenant, res.Op.ID)
	require.NoError(t, err)
	require.Equal(t, "resend_window_passed", h.Events[len(h.Events)-1].Kind)
}

// TestExhaustedAfterAnUnansweredRequestIsUnknown: the last attempt's error is
// retryable (409, key in use), but an earlier one went unanswered and may have been
// carried out, so running out of attempts hands the op to the reconciler, not to a
// person as "retryable".
func TestExhaustedAfterAnUnansweredRequestIsUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect})
	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault409})
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true, MaxAttempts: 2})
	optest.Start(t, ob)
	_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "tired", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)

	op := optest.WaitKeyStatus(t, ob, tenant, "tired", protocol.StatusUnknown, 20*time.Second)
	require.Equal(t, 2, op.Attempts)
	require.Contains(t, string(op.Error), "conflict")
	require.Equal(t, 1, fake.EffectCount())
}

// TestTakeoverResendKeepsTheKeyWindow: a job that finds its op dispatching (the worker
// died mid-call) resends under the same key; the dead request may have been carried
// out, so when the resend gets a retryable answer the op keeps a resend deadline.
func TestTakeoverResendKeepsTheKeyWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true, RetryBackoff: time.Minute})
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "taken", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	// As a worker that died mid-call leaves it.
	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET status = 'dispatching', attempts = 1, attempt_token = gen_random_uuid(),
		key_first_sent_at = now() - interval '1 minute', dispatch_started_at = now() - interval '1 minute' WHERE id = $1`, res.Op.ID)
	require.NoError(t, err)
	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault409})
	optest.Start(t, ob)

	resendBefore := waitPendingWithResendDeadline(t, pool, res.Op.ID)
	require.WithinDuration(t, time.Now().Add(24*time.Hour-2*time.Minute), resendBefore, time.Minute)
}

// TestStopDuringDispatchLosesNothing stops a worker (what SIGTERM does in oncebox serve)
// while a dispatch waits on the vendor: with a long enough grace period the answer is
// recorded; with a short one the dispatch is cancelled and goes back to pending (a
// vendor that deduplicates keys) or to unknown, never lost.
func TestStopDuringDispatchLosesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		grace  time.Duration
		native bool
		want   protocol.Status
	}{
		{"grace covers the call", 5 * time.Second, true, protocol.StatusSucceeded},
		// The vendor deduplicates the key: the op goes back to pending and its next
		// run resends under the same key.
		{"grace runs out, native keys", 200 * time.Millisecond, true, protocol.StatusPending},
		// Otherwise only the reconciler may decide.
		{"grace runs out, no native keys", 200 * time.Millisecond, false, protocol.StatusUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := dbtest.Schema(t)
			fake, srv := optest.HonouringTarget(t)
			t.Cleanup(fake.ReleaseHangs)
			tenant := optest.Tenant(t, pool, "acme")
			release := make(chan struct{})
			fake.SetBlock(release)
			effected := make(chan struct{}, 1)
			fake.EffectHook(func(fakewebhook.Effect) { effected <- struct{}{} })

			ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: tc.native})
			require.NoError(t, ob.Start(ctx))
			_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "term", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
			require.NoError(t, err)
			<-effected

			go func() {
				time.Sleep(time.Second)
				fake.SetBlock(nil)
				close(release)
			}()
			stopCtx, cancel := context.WithTimeout(ctx, tc.grace)
			defer cancel()
			require.NoError(t, ob.Stop(stopCtx))

			op, err := ob.Get(ctx, tenant, "term")
			require.NoError(t, err)
			require.Equal(t, tc.want, op.Status)
			require.Equal(t, 1, fake.EffectCount())
			if tc.want != protocol.StatusPending {
				return
			}
			// The next worker resends under the same key; the receiver replays.
			next := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true})
			require.NoError(t, next.Start(ctx))
			t.Cleanup(func() { _ = next.Stop(context.Background()) })
			require.Eventually(t, func() bool {
				op, err := next.Get(ctx, tenant, "term")
				return err == nil && op.Status == protocol.StatusSucceeded
			}, 10*time.Second, 20*time.Millisecond)
			require.Equal(t, 1, fake.EffectCount())
		})
	}
}

// TestBatchedCompletionFinishesJobs records results in one statement and leaves the job
// to River's completer: every op succeeds once and every job ends completed.
func TestBatchedCompletionFinishesJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")
	v, err := webhook.New(webhook.Config{Targets: map[string]webhook.Target{"crm": {BaseURL: srv.URL}}, NativeIdempotency: true})
	require.NoError(t, err)
	reg, err := outbox.NewRegistry(optest.WebhookTool())
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Vendors: []vendorapi.Vendor{v}, BatchedCompletion: ptrTo(true),
		RetryBackoff: func(int) time.Duration { return 50 * time.Millisecond }})
	require.NoError(t, err)
	optest.Start(t, ob)

	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault409}) // one retry on the way
	const n = 20
	for i := 0; i < n; i++ {
		_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: fmt.Sprintf("b%d", i), Tool: "webhook.post", Args: optest.WebhookArgs(i)})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		return dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op WHERE status = 'succeeded'") == n &&
			dbtest.Count(t, pool, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch' AND state <> 'completed'") == 0
	}, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, n, fake.EffectCount())
}

// TestSealedArgsThatCannotBeOpenedGoToReview enqueues a redacting tool's op under one
// seal key and works it with another: nothing reaches the vendor, a person decides.
func TestSealedArgsThatCannotBeOpenedGoToReview(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake, srv := optest.HonouringTarget(t)
	tenant := optest.Tenant(t, pool, "acme")

	tool := optest.WebhookTool()
	tool.Redact = func(json.RawMessage) json.RawMessage { return json.RawMessage(`{"redacted":true}`) }
	reg, err := outbox.NewRegistry(tool)
	require.NoError(t, err)
	keyA, keyB := make([]byte, seal.KeySize), make([]byte, seal.KeySize)
	keyB[0] = 1
	writer, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, SealKey: keyA})
	require.NoError(t, err)
	v, err := webhook.New(webhook.Config{Targets: map[string]webhook.Target{"crm": {BaseURL: srv.URL}}})
	require.NoError(t, err)
	worker, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Vendors: []vendorapi.Vendor{v}, SealKey: keyB})
	require.NoError(t, err)

	_, err = writer.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "sealed", Tool: "webhook.post", Args: optest.WebhookArgs(1)})
	require.NoError(t, err)
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM oncebox_op WHERE args::text = '{"redacted": true}' AND sealed_args IS NOT NULL`))
	optest.Start(t, worker)

	op := optest.WaitKeyStatus(t, worker, tenant, "sealed", protocol.StatusNeedsReview, 10*time.Second)
	require.Contains(t, string(op.Error), "sealed_args")
	require.Contains(t, string(op.Error), "ONCEBOX_SEAL_KEY")
	require.True(t, op.NothingSent(), "the op says nothing was sent: %s", op.Error)
	require.Zero(t, fake.Requests(), "nothing was sent without the arguments")
}

func ptrTo[T any](v T) *T { return &v }
