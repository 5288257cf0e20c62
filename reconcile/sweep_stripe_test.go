package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

func TestStripeCrashAfterCreateIsFoundByTagAfterTheKeyWindow(t *testing.T) {
	t.Parallel()
	fake, v := optest.StripeFake(t)
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})

	// The op's key was first sent a day ago (its earlier attempts were refused before
	// Stripe ran them), so Stripe no longer deduplicates it and the worker may not
	// resend after a lost answer.
	op := e.Enqueue(t, "pay-1", protocol.ToolPaymentIntent, optest.PaymentArgs(1200))
	_, err := e.Pool.Exec(context.Background(),
		"UPDATE oncebox_op SET key_first_sent_at = now() - interval '25 hours' WHERE id = $1", op.ID)
	require.NoError(t, err)
	// The PaymentIntent is created, then the connection drops: the worker cannot know.
	fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultDropAfterCreate, Path: "/v1/payment_intents"})
	e.Start(t)
	e.WaitStatus(t, op.ID, protocol.StatusUnknown)
	require.Equal(t, 1, fake.CreatedCount())
	// A day later Stripe has forgotten the key: a resend would charge twice.
	fake.ExpireIdempotencyKeys()

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Succeeded)
	pis, _ := fake.ByTag(vendorapi.TagKey, op.ID)
	require.Len(t, pis, 1)
	got := e.Get(t, op.ID)
	require.Equal(t, protocol.StatusSucceeded, got.Status)
	require.Equal(t, pis[0].ID, got.VendorRef)
	require.Contains(t, string(got.Result), pis[0].ID)
	require.Equal(t, 1, fake.CreatedCount(), "reconciliation must create nothing")
	require.Equal(t, reconcile.Succeeded, e.reconcileEvents(t, op.ID)[0]["decision"])
}

func TestStripeTwoTaggedPaymentIntentsNeedReview(t *testing.T) {
	t.Parallel()
	fake, v := optest.StripeFake(t)
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	op := e.SeedUnknown(t, "pay-dup", protocol.ToolPaymentIntent, optest.PaymentArgs(500), time.Minute, false)
	fake.AddPaymentIntent(fakestripe.PaymentIntent{Amount: 500, Metadata: map[string]string{vendorapi.TagKey: op.ID}})
	fake.AddPaymentIntent(fakestripe.PaymentIntent{Amount: 500, Metadata: map[string]string{vendorapi.TagKey: op.ID}})

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Duplicates)
	require.Equal(t, protocol.StatusNeedsReview, e.Get(t, op.ID).Status)
	require.Equal(t, 1, e.obs.count(e.obs.duplicates, "stripe"))
	evs := e.reconcileEvents(t, op.ID)
	require.Equal(t, reconcile.Duplicate, evs[0]["decision"])
	require.Len(t, evs[0]["objects"], 2)
}

func TestStripeDeclinedPaymentIntentIsAFailure(t *testing.T) {
	t.Parallel()
	fake, v := optest.StripeFake(t)
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	args := map[string]any{"amount": 700, "currency": "usd", "confirm": true, "payment_method": "pm_card_chargeDeclined"}
	op := e.SeedUnknown(t, "pay-declined", protocol.ToolPaymentIntent, args, time.Minute, false)
	fake.AddPaymentIntent(fakestripe.PaymentIntent{Amount: 700, Status: "requires_payment_method",
		PaymentMethod: "pm_card_chargeDeclined", Metadata: map[string]string{vendorapi.TagKey: op.ID}})

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Failed)
	got := e.Get(t, op.ID)
	require.Equal(t, protocol.StatusFailed, got.Status)
	require.Contains(t, string(got.Error), "requires_payment_method")
	require.Equal(t, reconcile.Refused, e.reconcileEvents(t, op.ID)[0]["decision"])
}

func TestStripeStaleKeyResendsUnderTheNextGeneration(t *testing.T) {
	t.Parallel()
	fake, v := optest.StripeFake(t)
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	// The vendor answered the key with a replayed stored 500 and holds nothing.
	op := e.SeedUnknown(t, "pay-stale", protocol.ToolPaymentIntent, optest.PaymentArgs(900), time.Minute, true)

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Resent)
	got := e.Get(t, op.ID)
	require.Equal(t, protocol.StatusPending, got.Status)
	require.Equal(t, 1, got.Generation)
	newKey := vendorapi.VendorKey(e.Tenant, "pay-stale", protocol.ToolPaymentIntent, 1)
	require.Equal(t, newKey, got.VendorKey)
	require.NotEqual(t, op.VendorKey, got.VendorKey)
	require.Equal(t, 0, e.Count(t, "SELECT count(*) FROM oncebox_op WHERE id = $1 AND (stale_key OR key_first_sent_at IS NOT NULL)", op.ID))
	evs := e.reconcileEvents(t, op.ID)
	require.Equal(t, reconcile.ResendNewKey, evs[0]["decision"])
	require.EqualValues(t, 1, evs[0]["generation"])

	e.Start(t)
	done := e.WaitStatus(t, op.ID, protocol.StatusSucceeded)
	require.Equal(t, 1, fake.CreatedCount())
	require.Equal(t, 1, e.Count(t, "SELECT count(*) FROM "+opstate.AttemptRows+" a WHERE op_id = $1 AND vendor_key = $2", op.ID, newKey))
	pis, _ := fake.ByTag(vendorapi.TagKey, op.ID)
	require.Len(t, pis, 1)
	require.Equal(t, pis[0].ID, done.VendorRef)
}
