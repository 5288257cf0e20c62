package vendorevents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/protocol"
)

// postSendGrid posts events signed as SendGrid signs them, with the env's key.
func (e *env) postSendGrid(t *testing.T, events ...map[string]any) map[string]any {
	t.Helper()
	body, err := json.Marshal(events)
	require.NoError(t, err)
	sig, ts, err := fakesendgrid.SignEvents(e.sgEvents.Key, body, time.Now())
	require.NoError(t, err)
	status, m := post(t, e.url+vendorevents.PathSendGrid, body,
		http.Header{fakesendgrid.SignatureHeader: {sig}, fakesendgrid.TimestampHeader: {ts}})
	require.Equal(t, http.StatusOK, status, m)
	return m
}

// sendGridEvent is one Event Webhook event about message msgID tagged with tag.
func sendGridEvent(event, msgID, tag string) map[string]any {
	return map[string]any{"event": event, "sg_message_id": msgID + ".filterdrecv-0", "email": "ada@example.com",
		"timestamp": time.Now().Unix(), "sg_event_id": "sg-" + event + msgID, "oncebox_op": tag}
}

// TestForeignMessageBounceIsNotTheOps: a signed bounce about another message
// (evilmsg123) tagged with a sent mail op's id is stored, but it is not the op's: the
// op's events, the lookup and the report know only its own message's.
func TestForeignMessageBounceIsNotTheOps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	mail := e.withSendGrid(t, &e.sgEvents)
	e.start(t, mail)
	op := e.enqueue(t, "mail-victim", protocol.ToolMail, mailArgs())
	got := e.waitStatus(t, op.ID, protocol.StatusSucceeded)
	e.waitEvents(t, op.ID, 2)

	m := e.postSendGrid(t, sendGridEvent("bounce", "evilmsg123", op.ID))
	require.EqualValues(t, 1, m["stored"])
	evs, err := e.store.ForOp(ctx, vendorevents.VendorSendGrid, op.ID)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	for _, ev := range evs {
		require.Equal(t, got.VendorRef, ev.ObjectID, "only the op's own message's events are the op's")
		require.False(t, ev.Unconfirmed)
	}
	states, err := e.store.OpStates(ctx, []string{op.ID})
	require.NoError(t, err)
	require.NotEqual(t, vendorevents.DeliveryBounced, states[op.ID].Delivery)
}

// TestForgedEventDoesNotSettleAnUnknownMail: a mail op whose answer was lost is
// unknown; a signed event about another message tagged with its id is kept as
// unconfirmed and neither settles the op nor names its message: without the Email
// Activity add-on the op waits (then goes to a person), and is never marked sent
// with the forged message id.
func TestForgedEventDoesNotSettleAnUnknownMail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	mail := e.withSendGrid(t, nil)
	e.sgFake.SetActivityForbidden(true)
	e.start(t, mail)
	e.sgFake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.FaultAcceptThenDrop})
	op := e.enqueue(t, "mail-unknown", protocol.ToolMail, mailArgs())
	e.waitStatus(t, op.ID, protocol.StatusUnknown)

	e.postSendGrid(t, sendGridEvent("delivered", "evilmsg123", op.ID))
	st := e.sweep(t)
	require.Zero(t, st.Succeeded, "%+v", st)
	got := e.get(t, op.ID)
	require.Equal(t, protocol.StatusUnknown, got.Status)
	require.Empty(t, got.VendorRef)
	evs, err := e.store.ForOp(ctx, vendorevents.VendorSendGrid, op.ID)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.True(t, evs[0].Unconfirmed, "shown, marked unconfirmed")
	require.Equal(t, 1, e.sgFake.SendCount())
}

// TestUpperCaseTagIsTheOps: a tag written in upper case with spaces around it is stored
// as the op id it names, and the op sees the event.
func TestUpperCaseTagIsTheOps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	mail := e.withSendGrid(t, nil)
	e.start(t, mail)
	op := e.enqueue(t, "mail-upper", protocol.ToolMail, mailArgs())
	got := e.waitStatus(t, op.ID, protocol.StatusSucceeded)

	m := e.postSendGrid(t, sendGridEvent("delivered", got.VendorRef, " "+strings.ToUpper(op.ID)+" "))
	require.EqualValues(t, 1, m["stored"])
	require.EqualValues(t, 0, m["orphans"])
	require.Equal(t, 1, e.count(t, "SELECT count(*) FROM oncebox_vendor_event WHERE op_tag = $1", op.ID), "stored in lower case")
	evs, err := e.store.ForOp(ctx, vendorevents.VendorSendGrid, op.ID)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, vendorevents.DeliveryDelivered, evs[0].Status)
}

// stripeEventOf is a signed-to-be payment_intent event about intent pi tagged with tag.
func stripeEventOf(id, pi, tag string) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "api_version": "2024-06-20", "created": time.Now().Unix(),
		"type": "payment_intent.succeeded", "data": map[string]any{"object": map[string]any{"id": pi, "object": "payment_intent",
			"amount": 1200, "currency": "usd", "status": "succeeded", "created": time.Now().Unix(),
			"metadata": map[string]string{"oncebox_op": tag}}}})
	return b
}

// TestTenantKeyStripeEventsOnlyThroughItsOwnEndpoint: an op sent with its tenant's own
// Stripe key takes no event from the platform's endpoint (signed with the platform's
// secret); the tenant's own endpoint refuses the platform's secret and takes the
// tenant's, and its events are the op's; another tenant's name has no endpoint.
func TestTenantKeyStripeEventsOnlyThroughItsOwnEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	wrapped, _ := e.withStripe(t, nil)
	e.start(t, wrapped)
	op := e.enqueue(t, "pi-own-key", protocol.ToolPaymentIntent,
		map[string]any{"amount": 1200, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true})
	got := e.waitStatus(t, op.ID, protocol.StatusSucceeded)
	// As sent with the tenant's own key (what the op's insert records for such a tenant).
	_, err := e.pool.Exec(ctx, "UPDATE oncebox_op SET vendor_account = 'key:0123456789abcdef' WHERE id = $1", op.ID)
	require.NoError(t, err)

	sign := func(secret string, body []byte) http.Header {
		return http.Header{"Stripe-Signature": {fakestripe.SignPayload(secret, body, time.Now())}}
	}
	platform := stripeEventOf("evt_platform", got.VendorRef, op.ID)
	status, m := post(t, e.url+vendorevents.PathStripe, platform, sign(stripeSecret, platform))
	require.Equal(t, http.StatusOK, status, m)
	evs, err := e.store.ForOp(ctx, vendorevents.VendorStripe, op.ID)
	require.NoError(t, err)
	require.Empty(t, evs, "the platform's endpoint speaks for the platform's account, not the tenant's own")

	own := stripeEventOf("evt_own", got.VendorRef, op.ID)
	status, m = post(t, e.url+vendorevents.PathStripeTenant+"acme", own, sign(stripeSecret, own))
	require.Equal(t, http.StatusBadRequest, status, "the platform's secret does not sign the tenant's events")
	require.Equal(t, protocol.ProblemInvalidSignature, m["type"])
	status, m = post(t, e.url+vendorevents.PathStripeTenant+"other", own, sign(tenantSecret, own))
	require.Equal(t, http.StatusNotFound, status, m)

	status, m = post(t, e.url+vendorevents.PathStripeTenant+"acme", own, sign(tenantSecret, own))
	require.Equal(t, http.StatusOK, status, m)
	require.EqualValues(t, 1, m["stored"])
	evs, err = e.store.ForOp(ctx, vendorevents.VendorStripe, op.ID)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, "evt_own", evs[0].EventID)
	require.Equal(t, vendorevents.TenantAccount(e.tenant), evs[0].Account)
}
