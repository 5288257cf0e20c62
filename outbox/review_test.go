package outbox_test

import (
	"context"
	"encoding/json"
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

// manualEvent returns the detail of the op's last manual resolution and its actor.
func manualEvent(t *testing.T, e *optest.Env, id string) (map[string]any, string) {
	t.Helper()
	h, err := e.Ob.History(context.Background(), e.Tenant, id)
	require.NoError(t, err)
	for i := len(h.Events) - 1; i >= 0; i-- {
		if h.Events[i].Kind == "manual_resolution" {
			var d map[string]any
			require.NoError(t, json.Unmarshal(h.Events[i].Detail, &d))
			return d, h.Events[i].Actor
		}
	}
	t.Fatalf("no manual_resolution event for %s", id)
	return nil, ""
}

func TestManualResolutions(t *testing.T) {
	t.Parallel()
	fake, _, v := optest.WebhookFake(t, fakewebhook.Config{HonourKeys: true}, "")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	ctx := context.Background()
	ok := e.SeedUnknown(t, "ok", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)
	bad := e.SeedUnknown(t, "bad", protocol.ToolWebhookPost, optest.HookArgs(2), time.Minute, false)
	again := e.SeedUnknown(t, "again", protocol.ToolWebhookPost, optest.HookArgs(3), time.Minute, false)
	require.Equal(t, 3, e.Reconcile(t).NeedsReview) // lookups unavailable

	items, err := e.Ob.ListReview(ctx, 0)
	require.NoError(t, err)
	require.Len(t, items, 3)
	require.Equal(t, "reconcile: lookup_unavailable", items[0].LastEvent)

	got, err := e.Ob.ResolveSucceeded(ctx, e.Tenant, "ok", "req_123", "seen in the receiver's logs", "ada")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusSucceeded, got.Status)
	require.Equal(t, "req_123", got.VendorRef)
	d, actor := manualEvent(t, e, ok.ID)
	require.Equal(t, "ada", actor)
	require.Equal(t, "resolved_succeeded", d["decision"])
	require.Equal(t, "seen in the receiver's logs", d["reason"])

	got, err = e.Ob.ResolveFailed(ctx, e.Tenant, "bad", "receiver rejected it", "ada")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusFailed, got.Status)
	require.Contains(t, string(got.Error), "receiver rejected it")

	got, err = e.Ob.ReleaseForResend(ctx, e.Tenant, "again", "nothing arrived", "bob", true)
	require.NoError(t, err)
	require.Equal(t, protocol.StatusPending, got.Status)
	require.Equal(t, 1, got.Generation)
	require.Equal(t, vendorapi.VendorKey(e.Tenant, "again", protocol.ToolWebhookPost, 1), got.VendorKey)
	d, actor = manualEvent(t, e, again.ID)
	require.Equal(t, "bob", actor)
	require.Equal(t, true, d["new_key"])

	// Only needs_review and unknown ops can be resolved by hand.
	_, err = e.Ob.ResolveFailed(ctx, e.Tenant, "ok", "oops", "ada")
	require.ErrorIs(t, err, outbox.ErrWrongState)
	_, err = e.Ob.ReleaseForResend(ctx, e.Tenant, "bad", "oops", "ada", false)
	require.ErrorIs(t, err, outbox.ErrWrongState)
	_, err = e.Ob.ResolveSucceeded(ctx, e.Tenant+1, "ok", "req_1", "other tenant", "ada")
	require.ErrorIs(t, err, outbox.ErrNotFound)

	items, err = e.Ob.ListReview(ctx, e.Tenant)
	require.NoError(t, err)
	require.Empty(t, items)

	e.Start(t)
	e.WaitStatus(t, again.ID, protocol.StatusSucceeded)
	effects := fake.EffectsFor(again.ID)
	require.Len(t, effects, 1)
	require.Equal(t, vendorapi.VendorKey(e.Tenant, "again", protocol.ToolWebhookPost, 1), effects[0].Key)
	require.Empty(t, fake.EffectsFor(bad.ID))
}

// TestManualResolutionRefusesUnstorableText: a reason, actor or vendor object id that
// Postgres cannot store is refused as invalid input (the CLI prints why),
// not failed in the database; the op stays as it was.
func TestManualResolutionRefusesUnstorableText(t *testing.T) {
	t.Parallel()
	_, _, v := optest.WebhookFake(t, fakewebhook.Config{HonourKeys: true}, "")
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	ctx := context.Background()
	op := e.SeedUnknown(t, "k", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)
	require.Equal(t, 1, e.Reconcile(t).NeedsReview)

	for name, resolve := range map[string]func() error{
		"succeeded reason": func() error {
			_, err := e.Ob.ResolveSucceeded(ctx, e.Tenant, "k", "req_1", "seen\x00", "ada")
			return err
		},
		"succeeded ref": func() error {
			_, err := e.Ob.ResolveSucceeded(ctx, e.Tenant, "k", "req\x00", "seen", "ada")
			return err
		},
		"failed reason":    func() error { _, err := e.Ob.ResolveFailed(ctx, e.Tenant, "k", "no\x00", "ada"); return err },
		"failed bad utf-8": func() error { _, err := e.Ob.ResolveFailed(ctx, e.Tenant, "k", "no\xff", "ada"); return err },
		"resend actor": func() error {
			_, err := e.Ob.ReleaseForResend(ctx, e.Tenant, "k", "again", "a\x00", false)
			return err
		},
	} {
		err := resolve()
		require.ErrorIs(t, err, vendorapi.ErrInvalidArgs, name)
	}
	require.Equal(t, protocol.StatusNeedsReview, e.Get(t, op.ID).Status)
}
