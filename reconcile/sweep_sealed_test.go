package reconcile_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

// nestingRedactor is a Redact for webhook.post that is deliberately not idempotent: it
// wraps the body once more on every call, so that redacting stored args that are
// already redacted shows. It counts its calls.
type nestingRedactor struct{ calls atomic.Int32 }

func (r *nestingRedactor) redact(args json.RawMessage) json.RawMessage {
	r.calls.Add(1)
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return args
	}
	body := m["body"]
	if len(body) == 0 {
		body = json.RawMessage("null")
	}
	m["body"] = json.RawMessage(`{"redacted":` + string(body) + `}`)
	out, _ := json.Marshal(m)
	return out
}

// newRedactingEnv is newSweepEnv with a webhook.post that redacts (through r) and, when
// sealKey is set, an Outbox that seals the full args: the stored args are then the
// redacted form from the start.
func newRedactingEnv(t *testing.T, v vendorapi.Vendor, r *nestingRedactor, sealKey []byte) *sweepEnv {
	t.Helper()
	pool := dbtest.Schema(t)
	builtin := tools.Builtin(tools.Config{WebhookTargets: []string{"hooks", "deadhooks"}})
	for i := range builtin {
		if builtin[i].Name == protocol.ToolWebhookPost {
			builtin[i].Redact = r.redact
		}
	}
	reg, err := outbox.NewRegistry(builtin...)
	require.NoError(t, err)
	obs := newCountObserver()
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Vendors: []vendorapi.Vendor{v}, SealKey: sealKey,
		Queues: map[string]dispatch.QueueConfig{v.Name(): {JobTimeout: 5 * time.Second}}, Reconcile: reconcile.Config{Observer: obs}})
	require.NoError(t, err)
	var tenant int64
	require.NoError(t, pool.QueryRow(context.Background(),
		"INSERT INTO oncebox_tenant (name) VALUES ('acme') RETURNING id").Scan(&tenant))
	return &sweepEnv{Env: &optest.Env{Pool: pool, Ob: ob, Tenant: tenant}, obs: obs}
}

// storedArgs reads an op's stored args and whether it still has sealed args.
func (e *sweepEnv) storedArgs(t *testing.T, id string) (string, bool) {
	t.Helper()
	var (
		args   string
		sealed bool
	)
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		"SELECT args::text, sealed_args IS NOT NULL FROM oncebox_op WHERE id = $1", id).Scan(&args, &sealed))
	return args, sealed
}

func sealKey() []byte {
	k := make([]byte, seal.KeySize)
	for i := range k {
		k[i] = byte(i + 1)
	}
	return k
}

// redactedOnce is optest.HookArgs(n) redacted by nestingRedactor once.
func redactedOnce(n int) string {
	return `{"target":"hooks","path":"/orders","body":{"redacted":{"n":` + string(rune('0'+n)) + `}}}`
}

// TestSweepAdoptDropsSealedArgs: an op whose full args are sealed and whose stored args
// are redacted is adopted by the sweeper; once terminal its sealed copy is gone and its
// stored args are not redacted a second time.
func TestSweepAdoptDropsSealedArgs(t *testing.T) {
	t.Parallel()
	_, srv, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	r := &nestingRedactor{}
	e := newRedactingEnv(t, v, r, sealKey())
	op := e.SeedUnknown(t, "sealed-adopt", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)
	args, sealed := e.storedArgs(t, op.ID)
	require.True(t, sealed, "the full args are sealed at enqueue")
	require.JSONEq(t, redactedOnce(1), args)
	require.EqualValues(t, 1, r.calls.Load())

	postEffect(t, srv.URL, op.ID)
	st := e.Reconcile(t)
	require.Equal(t, 1, st.Succeeded)
	require.Equal(t, protocol.StatusSucceeded, e.Get(t, op.ID).Status)

	args, sealed = e.storedArgs(t, op.ID)
	require.False(t, sealed, "a terminal op keeps no sealed args")
	require.JSONEq(t, redactedOnce(1), args, "stored redacted args are not redacted again")
	require.EqualValues(t, 1, r.calls.Load(), "Redact is not called on args that are already redacted")
}

// TestSweepAdoptRedactsUnsealedArgs: without a seal key the stored args are the full
// ones, and the sweeper redacts them when it adopts.
func TestSweepAdoptRedactsUnsealedArgs(t *testing.T) {
	t.Parallel()
	_, srv, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	r := &nestingRedactor{}
	e := newRedactingEnv(t, v, r, nil)
	op := e.SeedUnknown(t, "clear-adopt", protocol.ToolWebhookPost, optest.HookArgs(2), time.Minute, false)
	args, sealed := e.storedArgs(t, op.ID)
	require.False(t, sealed)
	require.JSONEq(t, `{"target":"hooks","path":"/orders","body":{"n":2}}`, args)

	postEffect(t, srv.URL, op.ID)
	require.Equal(t, 1, e.Reconcile(t).Succeeded)
	args, sealed = e.storedArgs(t, op.ID)
	require.False(t, sealed)
	require.JSONEq(t, redactedOnce(2), args)
	require.EqualValues(t, 1, r.calls.Load())
}

// TestManualResolutionDropsSealedArgs: a person's resolution makes the op terminal: its
// sealed args are dropped and its redacted args kept as they are.
func TestManualResolutionDropsSealedArgs(t *testing.T) {
	t.Parallel()
	_, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "")
	r := &nestingRedactor{}
	e := newRedactingEnv(t, v, r, sealKey())
	ctx := context.Background()
	ok := e.SeedUnknown(t, "sealed-ok", protocol.ToolWebhookPost, optest.HookArgs(3), time.Minute, false)
	bad := e.SeedUnknown(t, "sealed-bad", protocol.ToolWebhookPost, optest.HookArgs(4), time.Minute, false)
	require.Equal(t, 2, e.Reconcile(t).NeedsReview) // lookups unavailable
	require.EqualValues(t, 2, r.calls.Load())

	got, err := e.Ob.ResolveSucceeded(ctx, e.Tenant, "sealed-ok", "req_1", "seen in the logs", "ada")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusSucceeded, got.Status)
	got, err = e.Ob.ResolveFailed(ctx, e.Tenant, "sealed-bad", "never arrived", "ada")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusFailed, got.Status)

	for n, id := range map[int]string{3: ok.ID, 4: bad.ID} {
		args, sealed := e.storedArgs(t, id)
		require.False(t, sealed, "a terminal op keeps no sealed args")
		require.JSONEq(t, redactedOnce(n), args)
	}
	require.EqualValues(t, 2, r.calls.Load(), "Redact is not called on args that are already redacted")
}
