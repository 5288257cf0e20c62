package vendorevents_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/vendorapi"
)

// sweep runs one sweep.
func (e *env) sweep(t *testing.T) reconcile.Stats {
	t.Helper()
	st, err := e.ob.ReconcileOnce(context.Background())
	require.NoError(t, err)
	return st
}

// TestUnknownMailEventsAloneDoNotSettleIt: a mail op whose answer was lost has no
// vendor_ref, so its events are unconfirmed (anyone sending through the account can tag
// a message with its id): without the Email Activity add-on it waits instead of being
// settled from them; once SendGrid can be asked with the op's own key, it is settled
// from SendGrid's answer, never resent.
func TestUnknownMailEventsAloneDoNotSettleIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.sgEvents
	cfg.Config.Delay = 300 * time.Millisecond // the events come after the lost answer
	mail := e.withSendGrid(t, &cfg)
	e.sgFake.SetActivityForbidden(true) // the Email Activity add-on is missing: 403
	e.start(t, mail)

	e.sgFake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.FaultAcceptThenDrop})
	op := e.enqueue(t, "mail-403", protocol.ToolMail, mailArgs())
	e.waitStatus(t, op.ID, protocol.StatusUnknown)
	e.waitEvents(t, op.ID, 2)

	st := e.sweep(t)
	require.Equal(t, 1, st.LookupErrors, "unconfirmed events settle nothing: checked again later: %+v", st)
	require.Equal(t, protocol.StatusUnknown, e.get(t, op.ID).Status)

	e.sgFake.SetActivityForbidden(false)
	require.Eventually(t, func() bool {
		require.NoError(t, e.ob.CheckSoon(context.Background(), []string{op.ID}))
		return e.sweep(t).Succeeded == 1
	}, 15*time.Second, 200*time.Millisecond)
	got := e.get(t, op.ID)
	require.Equal(t, protocol.StatusSucceeded, got.Status)
	msgs := e.sgFake.ByCustomArg(vendorapi.TagKey, op.ID)
	require.Len(t, msgs, 1)
	require.Equal(t, msgs[0].XMessageID, got.VendorRef)
	require.Equal(t, 1, e.sgFake.SendCount(), "one email, never resent")
}

func TestUnknownMailWithoutEventYetWaitsInsteadOfReview(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mail := e.withSendGrid(t, nil) // events configured in oncebox, but none has come
	e.sgFake.SetActivityForbidden(true)
	e.start(t, mail)

	e.sgFake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.FaultAcceptThenDrop})
	op := e.enqueue(t, "mail-no-event", protocol.ToolMail, mailArgs())
	e.waitStatus(t, op.ID, protocol.StatusUnknown)

	st := e.sweep(t)
	require.Equal(t, 1, st.LookupErrors, "checked again later, not handed to a person: %+v", st)
	require.Equal(t, protocol.StatusUnknown, e.get(t, op.ID).Status)

	// The events arrive late: they are unconfirmed (the op has no vendor_ref), so the
	// op still waits for SendGrid's own answer, and is never resent.
	require.NoError(t, e.sgFake.SetEvents(&e.sgEvents))
	msg := e.sgFake.ByCustomArg(vendorapi.TagKey, op.ID)[0]
	require.NoError(t, e.sgFake.PostEvents(msg.XMessageID))
	e.waitEvents(t, op.ID, 2)
	require.Equal(t, 1, e.sweep(t).LookupErrors)
	require.Equal(t, protocol.StatusUnknown, e.get(t, op.ID).Status)
	require.Equal(t, 1, e.sgFake.SendCount())
}

// TestUnknownStripeOpWaitsForStripeNotItsEvents: a payment intent whose answer was
// lost leaves the op unknown without a vendor_ref; its events are unconfirmed and do
// not settle it while Stripe's search lags (Stripe's own answer will), and no second
// intent is made.
func TestUnknownStripeOpWaitsForStripeNotItsEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wrapped, v := e.withStripe(t, &e.stEvents)
	e.start(t, wrapped)
	// A payment intent created whose answer was lost: the op is unknown, and Stripe's
	// search will not show the intent for an hour.
	args := map[string]any{"amount": 1200, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}
	op := e.enqueue(t, "pi-lost", protocol.ToolPaymentIntent, args)
	_, err := e.pool.Exec(context.Background(), "DELETE FROM river_job WHERE args->>'op_id' = $1", op.ID)
	require.NoError(t, err)
	raw, _ := json.Marshal(args)
	_, err = v.Dispatch(context.Background(), vendorapi.DispatchParams{OpID: op.ID, TenantID: e.tenant, Tool: protocol.ToolPaymentIntent,
		Args: raw, VendorKey: op.VendorKey, Attempt: 1})
	require.NoError(t, err)
	_, err = e.pool.Exec(context.Background(), `UPDATE oncebox_op SET status = 'unknown', attempts = 1, attempt_token = gen_random_uuid(),
		dispatch_started_at = now(), key_first_sent_at = now() WHERE id = $1`, op.ID)
	require.NoError(t, err)
	_, err = e.pool.Exec(context.Background(), `INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at, finished_at, outcome)
		SELECT id, 1, attempt_token, vendor_key, now(), now(), 'unknown' FROM oncebox_op WHERE id = $1`, op.ID)
	require.NoError(t, err)
	e.waitEvents(t, op.ID, 2)

	st := e.sweep(t)
	require.Zero(t, st.Succeeded, "unconfirmed events settle nothing: %+v", st)
	require.Empty(t, e.get(t, op.ID).VendorRef)
	require.Equal(t, protocol.StatusUnknown, e.get(t, op.ID).Status)
	require.Len(t, e.stFake.PaymentIntents(), 1, "never sent twice")
	evs, err := e.store.ForOp(context.Background(), vendorevents.VendorStripe, op.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.True(t, evs[0].Unconfirmed && evs[1].Unconfirmed)

	// The same search-only lookup waits out the search lag.
	res, err := v.Lookup(context.Background(), vendorapi.LookupParams{OpID: op.ID, Tool: protocol.ToolPaymentIntent, Args: raw})
	require.NoError(t, err)
	require.Empty(t, res.Objects, "search has not caught up")
}

func TestEventsBeforeTheAnswerDoNotConfuseTheStateMachine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mail := e.withSendGrid(t, &e.sgEvents)
	e.start(t, mail)

	// SendGrid stores the message, its events arrive, and only then does the worker get
	// its answer: the op succeeds once, through the worker, and the reconciler has
	// nothing to do.
	e.sgFake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.FaultHang})
	op := e.enqueue(t, "mail-early-events", protocol.ToolMail, mailArgs())
	require.Eventually(t, func() bool { return e.sgFake.SendCount() == 1 }, 10*time.Second, 10*time.Millisecond)
	e.waitEvents(t, op.ID, 2)
	// A clean run is inside its call: the op reads pending, its job runs.
	require.Equal(t, protocol.StatusPending, e.get(t, op.ID).Status)
	require.Equal(t, 0, e.sweep(t).Looked, "an op whose dispatch is in flight is not the reconciler's")
	require.Equal(t, protocol.StatusPending, e.get(t, op.ID).Status)
	// The hang answers after Config.HangFor or when the job times out (5 s): either
	// way the op ends succeeded or unknown, and an unknown one is resolved from its
	// events.
	require.Eventually(t, func() bool {
		s := e.get(t, op.ID).Status
		return s == protocol.StatusSucceeded || s == protocol.StatusUnknown
	}, 20*time.Second, 20*time.Millisecond)
	if e.get(t, op.ID).Status == protocol.StatusUnknown {
		require.Equal(t, 1, e.sweep(t).Succeeded)
	}
	require.Equal(t, protocol.StatusSucceeded, e.get(t, op.ID).Status)
	require.Equal(t, 1, e.sgFake.SendCount())
	require.Equal(t, 0, e.sweep(t).Looked)

	// Out of order and duplicated Stripe events settle on the most final state.
	evs := []vendorevents.Event{
		{Type: "payment_intent.succeeded", ObjectType: "payment_intent", ObjectID: "pi_1", Status: "succeeded", OccurredAt: time.Unix(10, 0)},
		{Type: "payment_intent.created", ObjectType: "payment_intent", ObjectID: "pi_1", Status: "requires_payment_method", OccurredAt: time.Unix(10, 0)},
	}
	confirm := json.RawMessage(`{"confirm":true}`)
	objs, ok := vendorevents.Objects(evs, protocol.ToolPaymentIntent, confirm)
	require.True(t, ok)
	require.Len(t, objs, 1)
	require.Equal(t, "succeeded", objs[0].Status)
	// A created event alone does not settle a confirmed payment intent (it would read
	// as declined): the vendor is asked.
	_, ok = vendorevents.Objects(evs[1:], protocol.ToolPaymentIntent, confirm)
	require.False(t, ok)
	_, ok = vendorevents.Objects(evs[1:], protocol.ToolPaymentIntent, json.RawMessage(`{"confirm":false}`))
	require.True(t, ok)
}
