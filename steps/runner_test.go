package steps_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/steps"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

// notifyTool is a composite tool of two webhook posts to the "hooks" target: first,
// then second, which names first's op and runs only when the call asks for it
// (args {"order": string, "second": bool}).
func notifyTool() vendorapi.Tool {
	return vendorapi.Tool{
		Name:     "shop.notify",
		Vendor:   vendorapi.StepsVendor,
		Validate: func(json.RawMessage) error { return nil },
		Steps: []vendorapi.Step{
			{Name: "first", Tool: protocol.ToolWebhookPost,
				Args: json.RawMessage(`{"target": "hooks", "path": "/first", "body": {"order": {"$from": "/call/order"}}}`)},
			{Name: "second", Tool: protocol.ToolWebhookPost, When: "/call/second",
				Args: json.RawMessage(`{"target": "hooks", "path": "/second", "body": {"after": {"$from": "/steps/first/op_id"}}}`)},
		},
	}
}

// stepsEnv is a started Outbox with the built-in tools and notifyTool, dispatching to a
// fake webhook receiver, and a tenant of it.
type stepsEnv struct {
	ob     *outbox.Outbox
	pool   *pgxpool.Pool
	fake   *fakewebhook.Server
	tenant int64
}

func newStepsEnv(t *testing.T) stepsEnv {
	t.Helper()
	pool := dbtest.Schema(t)
	fake, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	reg, err := outbox.NewRegistry(append(tools.Builtin(tools.Config{WebhookTargets: []string{"hooks"}}), notifyTool())...)
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Vendors: []vendorapi.Vendor{v}, Queues: map[string]dispatch.QueueConfig{v.Name(): {JobTimeout: 5 * time.Second}},
		FetchPollInterval: 50 * time.Millisecond, RetryBackoff: func(int) time.Duration { return 50 * time.Millisecond }})
	require.NoError(t, err)
	optest.Start(t, ob)
	return stepsEnv{ob: ob, pool: pool, fake: fake, tenant: optest.Tenant(t, pool, "acme")}
}

// run enqueues a call of notifyTool and waits until its op succeeded.
func (e stepsEnv) run(t *testing.T, key string, args any) *outbox.Op {
	t.Helper()
	op := optest.Enqueue(t, e.ob, e.tenant, key, "shop.notify", args)
	return optest.WaitStatus(t, e.pool, e.ob, e.tenant, op.ID, protocol.StatusSucceeded)
}

// TestRunnerRunsEachStepOnceUnderItsDerivedKey: a composite op's steps run in order,
// each as an op of its own under steps.Key, the second filled from the first's op; the
// parent settles succeeded with its steps listed, and a step whose when names false
// shows steps.NotRun and is never sent.
func TestRunnerRunsEachStepOnceUnderItsDerivedKey(t *testing.T) {
	t.Parallel()
	e := newStepsEnv(t)
	fake := e.fake

	op := e.run(t, "both", map[string]any{"order": "o-1", "second": true})
	require.Len(t, op.Steps, 2)
	first, second := op.Steps[0], op.Steps[1]
	require.Equal(t, protocol.StepRef{Name: "first", Key: steps.Key(op.ID, "first"), OpID: first.OpID,
		Status: string(protocol.StatusSucceeded)}, first)
	require.Equal(t, steps.Key(op.ID, "second"), second.Key)
	require.Equal(t, string(protocol.StatusSucceeded), second.Status)
	require.Len(t, fake.EffectsFor(first.OpID), 1, "the first step is sent once")
	require.Len(t, fake.EffectsFor(second.OpID), 1, "the second step is sent once")
	require.Contains(t, string(fake.EffectsFor(second.OpID)[0].Body), first.OpID, "the second step names the first's op")

	skipped := e.run(t, "one", map[string]any{"order": "o-2", "second": false})
	require.Len(t, skipped.Steps, 2)
	require.Equal(t, string(protocol.StatusSucceeded), skipped.Steps[0].Status)
	require.Equal(t, protocol.StepRef{Name: "second", Key: steps.Key(skipped.ID, "second"), Status: steps.NotRun}, skipped.Steps[1])
	require.Equal(t, 3, fake.EffectCount(), "the skipped step is never sent")
}

// TestStepKeysAreReserved: a caller's key under steps.KeyPrefix is refused, so no call
// can forge a step's op.
func TestStepKeysAreReserved(t *testing.T) {
	t.Parallel()
	e := newStepsEnv(t)
	_, err := e.ob.Enqueue(t.Context(), outbox.EnqueueParams{TenantID: e.tenant, Key: steps.Key("00000000-0000-4000-8000-000000000001", "first"),
		Tool: protocol.ToolWebhookPost, Args: json.RawMessage(`{"target": "hooks", "path": "/x", "body": {}}`)})
	var ke *protocol.KeyError
	require.ErrorAs(t, err, &ke)
	require.Equal(t, "reserved", ke.Rule)
}
