package reconcile_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/sendgrid"
)

// sendgridFake starts a fake SendGrid whose activity lags by fakeLag, and a vendor that
// trusts a "none found" only lookupLag after a send.
func sendgridFake(t *testing.T, fakeLag, lookupLag time.Duration) (*fakesendgrid.Server, *sendgrid.Vendor) {
	t.Helper()
	fake := fakesendgrid.New(fakesendgrid.Config{ActivityLag: fakeLag, ActivityRatePerMinute: -1})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	v, err := sendgrid.New(sendgrid.Config{APIKey: "SG.reconcile-test", BaseURL: srv.URL, Timeout: 2 * time.Second,
		LookupLag: lookupLag, ActivityRatePerMinute: -1})
	require.NoError(t, err)
	return fake, v
}

func TestSendGridLostResponseWaitsThenFindsTheMessage(t *testing.T) {
	t.Parallel()
	fake, v := sendgridFake(t, 500*time.Millisecond, time.Second)
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	e.Start(t)

	fake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.FaultAcceptThenDrop})
	op := e.Enqueue(t, "mail-1", protocol.ToolMail, optest.MailArgs())
	e.WaitStatus(t, op.ID, protocol.StatusUnknown)

	// Within the lag the activity API shows nothing yet, and nothing is trusted.
	st := e.Reconcile(t)
	require.Equal(t, 1, st.Waiting)
	require.Equal(t, protocol.StatusUnknown, e.Get(t, op.ID).Status)

	var got *outbox.Op
	require.Eventually(t, func() bool {
		_, err := e.Ob.ReconcileOnce(context.Background())
		require.NoError(t, err)
		got = e.Get(t, op.ID)
		return got.Status != protocol.StatusUnknown
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, protocol.StatusSucceeded, got.Status)
	msgs := fake.ByCustomArg(vendorapi.TagKey, op.ID)
	require.Len(t, msgs, 1)
	require.Equal(t, 1, fake.SendCount(), "one email, never resent")
	evs := e.reconcileEvents(t, op.ID)
	require.Equal(t, reconcile.Wait, evs[0]["decision"])
	require.Equal(t, reconcile.Succeeded, evs[len(evs)-1]["decision"])
}

func TestSendGridReallyLostMessageIsResentOnce(t *testing.T) {
	t.Parallel()
	fake, v := sendgridFake(t, 0, 300*time.Millisecond)
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	// The send never reached SendGrid, but the worker could not know.
	op := e.SeedUnknown(t, "mail-lost", protocol.ToolMail, optest.MailArgs(), 2*time.Second, false)

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Resent)
	require.Equal(t, 0, fake.SendCount())

	e.Start(t)
	e.WaitStatus(t, op.ID, protocol.StatusSucceeded)
	require.Equal(t, 1, fake.SendCount())
	require.Len(t, fake.ByCustomArg(vendorapi.TagKey, op.ID), 1)
	// Another sweep finds nothing to do.
	require.Equal(t, 0, e.Reconcile(t).Looked)
}

func TestSendGridWithoutActivityAddOnNeedsReview(t *testing.T) {
	t.Parallel()
	fake, v := sendgridFake(t, 0, time.Second)
	fake.SetActivityForbidden(true)
	e := newSweepEnv(t, []vendorapi.Vendor{v}, reconcile.Config{})
	op := e.SeedUnknown(t, "mail-403", protocol.ToolMail, optest.MailArgs(), time.Minute, false)

	require.Equal(t, 1, e.Reconcile(t).NeedsReview)
	require.Equal(t, protocol.StatusNeedsReview, e.Get(t, op.ID).Status)
	evs := e.reconcileEvents(t, op.ID)
	require.Equal(t, reconcile.LookupUnavailable, evs[0]["decision"])
	require.NotContains(t, evs[0]["error"], "SG.reconcile-test", "no secret in an event")
	require.Equal(t, 0, fake.SendCount())
}
