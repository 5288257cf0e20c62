package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/testkit/testlog"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// postEffect makes the fake receiver perform an effect tagged with opID, as a lost
// dispatch would have.
func postEffect(t *testing.T, baseURL, opID string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, baseURL+"/orders", bytes.NewReader([]byte(`{"n":1}`)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Oncebox-Op", opID)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestSweepAdoptsTheOneTaggedObject(t *testing.T) {
	t.Parallel()
	fake, srv, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	op := e.SeedUnknown(t, "k1", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)
	postEffect(t, srv.URL, op.ID)
	effect := fake.EffectsFor(op.ID)[0]

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Looked)
	require.Equal(t, 1, st.Succeeded)

	got := e.Get(t, op.ID)
	require.Equal(t, protocol.StatusSucceeded, got.Status)
	require.Equal(t, effect.ID, got.VendorRef)
	require.JSONEq(t, `{"status":200,"body":{"id":"`+effect.ID+`","ok":true}}`, string(got.Result), "the shape of a dispatched op's result")
	require.Equal(t, 1, fake.EffectCount(), "the sweep must not act at the vendor")

	evs := e.reconcileEvents(t, op.ID)
	require.Len(t, evs, 1)
	require.Equal(t, reconcile.Succeeded, evs[0]["decision"])
	require.Equal(t, "unknown", evs[0]["from"])
	require.Equal(t, "succeeded", evs[0]["to"])
	require.Equal(t, effect.ID, evs[0]["objects"].([]any)[0].(map[string]any)["id"])
	require.Equal(t, 1, e.obs.count(e.obs.decisions, "webhook/"+reconcile.Succeeded))

	// Nothing is left to do.
	require.Equal(t, reconcile.Stats{}, e.Reconcile(t))
}

func TestSweepDuplicateNeedsReview(t *testing.T) {
	t.Parallel()
	_, srv, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	op := e.SeedUnknown(t, "dup", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)
	postEffect(t, srv.URL, op.ID)
	postEffect(t, srv.URL, op.ID)

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Duplicates)
	require.Equal(t, 1, st.NeedsReview)
	require.Equal(t, protocol.StatusNeedsReview, e.Get(t, op.ID).Status)
	require.Equal(t, 1, e.obs.count(e.obs.duplicates, "webhook"))

	evs := e.reconcileEvents(t, op.ID)
	require.Len(t, evs, 1)
	require.Equal(t, reconcile.Duplicate, evs[0]["decision"])
	require.Len(t, evs[0]["objects"], 2)

	items, err := e.Ob.ListReview(context.Background(), e.Tenant)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, op.ID, items[0].OpID)
	require.Equal(t, "dup", items[0].Key)
	require.Equal(t, "reconcile: duplicate", items[0].LastEvent)
	items, err = e.Ob.ListReview(context.Background(), e.Tenant+1)
	require.NoError(t, err)
	require.Empty(t, items)
}

func TestSweepLookupUnavailableNeedsReview(t *testing.T) {
	t.Parallel()
	_, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "") // no LookupPath
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	op := e.SeedUnknown(t, "k", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)

	st := e.Reconcile(t)
	require.Equal(t, 1, st.NeedsReview)
	require.Equal(t, protocol.StatusNeedsReview, e.Get(t, op.ID).Status)
	evs := e.reconcileEvents(t, op.ID)
	require.Equal(t, reconcile.LookupUnavailable, evs[0]["decision"])
	require.Contains(t, evs[0]["error"], "cannot be asked")
}

func TestSweepResendsWithTheSameKeyAfterTheLag(t *testing.T) {
	t.Parallel()
	fake, _, v := optest.WebhookFake(t, fakewebhook.Config{HonourKeys: true}, "/_lookup")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	op := e.SeedUnknown(t, "lost", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Resent)
	got := e.Get(t, op.ID)
	require.Equal(t, protocol.StatusPending, got.Status)
	require.Equal(t, op.VendorKey, got.VendorKey)
	require.Equal(t, 0, got.Generation)
	require.Equal(t, 1, e.Count(t, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch' AND args->>'op_id' = $1", op.ID))
	require.Equal(t, reconcile.Resend, e.reconcileEvents(t, op.ID)[0]["decision"])

	e.Start(t)
	done := e.WaitStatus(t, op.ID, protocol.StatusSucceeded)
	effects := fake.EffectsFor(op.ID)
	require.Len(t, effects, 1)
	require.Equal(t, op.VendorKey, effects[0].Key)
	require.Equal(t, effects[0].ID, done.VendorRef)
}

func TestSweepWaitsWithinTheLookupLag(t *testing.T) {
	t.Parallel()
	// A vendor whose lookups lag by an hour and find nothing yet.
	lagged, err := webhook.New(webhook.Config{Targets: map[string]webhook.Target{"hooks": {BaseURL: "http://127.0.0.1:1"}},
		LookupPath: "/_lookup", LookupLag: time.Hour})
	require.NoError(t, err)
	e := newSweepEnv(t, []vendorapi.Vendor{&stubLookup{Vendor: lagged}}, reconcile.Config{})
	op := e.SeedUnknown(t, "k", protocol.ToolWebhookPost, optest.HookArgs(1), time.Second, false)

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Waiting)
	require.Equal(t, protocol.StatusUnknown, e.Get(t, op.ID).Status)
	var next time.Time
	require.NoError(t, e.Pool.QueryRow(context.Background(), "SELECT next_check_at FROM oncebox_op WHERE id = $1", op.ID).Scan(&next))
	require.WithinDuration(t, time.Now().Add(time.Hour-time.Second), next, 5*time.Second)
	require.Equal(t, reconcile.Wait, e.reconcileEvents(t, op.ID)[0]["decision"])

	// Not due again before the lag is over.
	require.Equal(t, 0, e.Reconcile(t).Looked)
}

func TestSweepWaitsOutAnAttemptThatNeverFinished(t *testing.T) {
	t.Parallel()
	// Attempt 1's worker died mid-request 2s ago, so its request may still land
	// until its job timeout (5s here) is over, although attempt 2 has finished
	// since and the lookup finds nothing.
	v, err := webhook.New(webhook.Config{Targets: map[string]webhook.Target{"hooks": {BaseURL: "http://127.0.0.1:1"}},
		LookupPath: "/_lookup"})
	require.NoError(t, err)
	e := newSweepEnv(t, []vendorapi.Vendor{&stubLookup{Vendor: v}}, reconcile.Config{})
	op := e.SeedUnknown(t, "k", protocol.ToolWebhookPost, optest.HookArgs(1), time.Second, false)
	ctx := context.Background()
	_, err = e.Pool.Exec(ctx, `UPDATE oncebox_attempt SET attempt = 2 WHERE op_id = $1`, op.ID)
	require.NoError(t, err)
	var died time.Time
	require.NoError(t, e.Pool.QueryRow(ctx, `INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at)
		SELECT id, 1, gen_random_uuid(), vendor_key, now() - interval '2 seconds' FROM oncebox_op WHERE id = $1
		RETURNING started_at`, op.ID).Scan(&died))

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Waiting, "an empty lookup is trusted only once the unfinished attempt's job timeout is over")
	require.Equal(t, 0, st.Resent)
	var next time.Time
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT next_check_at FROM oncebox_op WHERE id = $1", op.ID).Scan(&next))
	require.WithinDuration(t, died.Add(5*time.Second), next, time.Second)
}

// stubLookup is a vendor whose lookups answer from a function; the rest is the
// embedded webhook vendor.
type stubLookup struct {
	*webhook.Vendor
	lookup func(ctx context.Context, p vendorapi.LookupParams) (*vendorapi.LookupResult, error)
}

func (s *stubLookup) Lookup(ctx context.Context, p vendorapi.LookupParams) (*vendorapi.LookupResult, error) {
	if s.lookup == nil {
		return &vendorapi.LookupResult{}, nil
	}
	return s.lookup(ctx, p)
}

func TestSweepRetriesAFailedLookupLater(t *testing.T) {
	t.Parallel()
	_, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{RetryLookupAfter: 2 * time.Minute})
	args := optest.HookArgs(1)
	args["target"] = "deadhooks" // nothing listens there
	op := e.SeedUnknown(t, "k", protocol.ToolWebhookPost, args, time.Minute, false)

	st := e.Reconcile(t)
	require.Equal(t, 1, st.LookupErrors)
	require.Equal(t, protocol.StatusUnknown, e.Get(t, op.ID).Status)
	var next time.Time
	require.NoError(t, e.Pool.QueryRow(context.Background(), "SELECT next_check_at FROM oncebox_op WHERE id = $1", op.ID).Scan(&next))
	require.WithinDuration(t, time.Now().Add(2*time.Minute), next, 5*time.Second)
	evs := e.reconcileEvents(t, op.ID)
	require.Equal(t, reconcile.LookupFailed, evs[0]["decision"])
	require.NotEmpty(t, evs[0]["error"])
	require.Equal(t, "unknown", evs[0]["to"])
}

func TestSweepDropsItsDecisionWhenAWorkerRecordedMeanwhile(t *testing.T) {
	t.Parallel()
	_, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	stub := &stubLookup{Vendor: v}
	e := newSweepEnv(t, []vendorapi.Vendor{stub}, reconcile.Config{})
	op := e.SeedUnknown(t, "k", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)
	stub.lookup = func(ctx context.Context, p vendorapi.LookupParams) (*vendorapi.LookupResult, error) {
		// A slow predecessor records its answer while the vendor is being asked.
		_, err := e.Pool.Exec(ctx, `UPDATE oncebox_op SET status = 'succeeded', vendor_ref = 'req_late', attempt_token = NULL WHERE id = $1`, p.OpID)
		require.NoError(t, err)
		return &vendorapi.LookupResult{}, nil
	}

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Skipped)
	require.Equal(t, 0, st.Resent)
	got := e.Get(t, op.ID)
	require.Equal(t, protocol.StatusSucceeded, got.Status)
	require.Equal(t, "req_late", got.VendorRef)
	require.Empty(t, e.reconcileEvents(t, op.ID))
	require.Equal(t, 0, e.Count(t, "SELECT count(*) FROM river_job WHERE args->>'op_id' = $1", op.ID))
}

func TestSweepResendOnNoneFalseNeedsReview(t *testing.T) {
	t.Parallel()
	_, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{ResendOnNone: map[string]bool{"webhook": false}})
	op := e.SeedUnknown(t, "k", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)

	require.Equal(t, 1, e.Reconcile(t).NeedsReview)
	require.Equal(t, protocol.StatusNeedsReview, e.Get(t, op.ID).Status)
	require.Equal(t, reconcile.NoneReview, e.reconcileEvents(t, op.ID)[0]["decision"])
}

func TestSweepMovesStuckDispatchingOpsToUnknown(t *testing.T) {
	t.Parallel()
	_, srv, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{StuckMargin: time.Second})
	ctx := context.Background()

	// stuck: dispatching for a minute (job timeout 5s), its job gone.
	stuck := e.Enqueue(t, "stuck", protocol.ToolWebhookPost, optest.HookArgs(1))
	// running: dispatching as long, but its job is still running.
	running := e.Enqueue(t, "running", protocol.ToolWebhookPost, optest.HookArgs(2))
	_, err := e.Pool.Exec(ctx, "DELETE FROM river_job WHERE args->>'op_id' = $1", stuck.ID)
	require.NoError(t, err)
	_, err = e.Pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(),
		attempted_by = ARRAY['elsewhere'] WHERE args->>'op_id' = $1`, running.ID)
	require.NoError(t, err)
	_, err = e.Pool.Exec(ctx, `UPDATE oncebox_op SET status = 'dispatching', attempts = 1, attempt_token = gen_random_uuid(),
		dispatch_started_at = now() - interval '1 minute' WHERE id = ANY($1::uuid[])`, []string{stuck.ID, running.ID})
	require.NoError(t, err)
	postEffect(t, srv.URL, stuck.ID)

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Stuck)
	require.Equal(t, 1, st.Succeeded)
	require.Equal(t, protocol.StatusSucceeded, e.Get(t, stuck.ID).Status)
	require.Equal(t, protocol.StatusDispatching, e.Get(t, running.ID).Status)

	evs := e.reconcileEvents(t, stuck.ID)
	require.Len(t, evs, 2)
	require.Equal(t, reconcile.Stuck, evs[0]["decision"])
	require.Equal(t, "dispatching", evs[0]["from"])
	require.Equal(t, "unknown", evs[0]["to"])
	require.Equal(t, reconcile.Succeeded, evs[1]["decision"])
}

func TestNewValidatesAndDefaults(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{})...)
	require.NoError(t, err)
	_, err = outbox.New(outbox.Config{Pool: pool, Tools: reg, Reconcile: reconcile.Config{Interval: time.Millisecond}})
	require.ErrorContains(t, err, "Interval")
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Reconcile: reconcile.Config{Periodic: true}})
	require.NoError(t, err)
	st, err := ob.ReconcileOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, st)
}

// TestStateChangeLogLinesCarryTheOpsFields: a decision that changes an op's state is
// logged with tenant, op id, key, conversation and tool call ids, attempt and vendor_ref.
func TestStateChangeLogLinesCarryTheOpsFields(t *testing.T) {
	t.Parallel()
	var buf testlog.Buffer
	_, _, v := optest.WebhookFake(t, fakewebhook.Config{HonourKeys: true}, "/_lookup")
	e := newSweepEnvFrom(t, []vendorapi.Vendor{v}, outbox.Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	op := e.SeedUnknown(t, "logged", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)
	_, err := e.Pool.Exec(context.Background(), "UPDATE oncebox_op SET conversation_id = 'conv-9', tool_call_id = 'call-3' WHERE id = $1", op.ID)
	require.NoError(t, err)

	require.Equal(t, 1, e.Reconcile(t).Resent)
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		if m["msg"] == "op state changed" {
			line = m
		}
	}
	require.NotNil(t, line, buf.String())
	for k, want := range map[string]any{"op_id": op.ID, "idempotency_key": "logged", "conversation_id": "conv-9",
		"tool_call_id": "call-3", "attempt": float64(1), "from": "unknown", "to": "pending", "vendor": "webhook"} {
		require.Equal(t, want, line[k], k)
	}
	require.Contains(t, line, "tenant")
	require.Contains(t, line, "vendor_ref")
}

// TestSweepAdoptsOnlyObjectsTaggedWithTheOp: a lookup that answers one object tagged
// for another op and one carrying no tag (an adapter whose own filter let them
// through) gives the op nothing to adopt: after the lag it is resent, never
// succeeded with another op's object.
func TestSweepAdoptsOnlyObjectsTaggedWithTheOp(t *testing.T) {
	t.Parallel()
	_, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	stub := &stubLookup{Vendor: v}
	e := newSweepEnv(t, []vendorapi.Vendor{stub}, reconcile.Config{})
	op := e.SeedUnknown(t, "k", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)
	other := e.SeedUnknown(t, "other", protocol.ToolWebhookPost, optest.HookArgs(2), time.Minute, false)
	stub.lookup = func(_ context.Context, p vendorapi.LookupParams) (*vendorapi.LookupResult, error) {
		if p.OpID != op.ID {
			return &vendorapi.LookupResult{}, nil
		}
		return &vendorapi.LookupResult{Objects: []vendorapi.VendorObject{
			{ID: "req_of_another_op", OpID: other.ID, Status: "delivered", Created: time.Now().Add(-time.Minute)},
			{ID: "req_untagged", Status: "delivered", Created: time.Now().Add(-time.Minute)},
		}}, nil
	}

	st := e.Reconcile(t)
	require.Equal(t, 0, st.Succeeded, "an object not tagged with the op was adopted")
	require.Equal(t, 0, st.Duplicates, "objects of other ops are not this op's duplicates")
	require.Equal(t, 2, st.Resent, "neither op has an object of its own: both are resent")
	got := e.Get(t, op.ID)
	require.Equal(t, protocol.StatusPending, got.Status)
	require.Empty(t, got.VendorRef)
	require.Nil(t, got.Result)
	evs := e.reconcileEvents(t, op.ID)
	require.Len(t, evs, 1)
	require.Equal(t, reconcile.Resend, evs[0]["decision"])
	require.Empty(t, evs[0]["objects"], "the event lists only the op's own objects")
}
