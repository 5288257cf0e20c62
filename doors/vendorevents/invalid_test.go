package vendorevents_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/doors/vendorevents"
)

// stripeObjectEvent is a payment_intent.succeeded event whose object has the id and
// metadata given.
func stripeObjectEvent(id, objectID string, metadata map[string]string, created time.Time) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "api_version": "2024-06-20", "created": created.Unix(),
		"type": "payment_intent.succeeded", "data": map[string]any{"object": map[string]any{"id": objectID, "object": "payment_intent",
			"amount": 500, "currency": "usd", "status": "succeeded", "created": created.Unix(), "metadata": metadata}}})
	return b
}

// TestBadEventsInASignedBatchAreCountedNotRefused: a signed SendGrid batch holding
// one good event and bad ones (a tag with NUL, a 6,000-character tag, an element that
// is not an event, an event dated an hour ahead) answers 200, stores the good event
// and counts each bad one invalid; a Stripe event with NUL in its metadata or object
// id, or dated an hour ahead, answers 200 and is counted invalid, as Stripe signs it.
func TestBadEventsInASignedBatchAreCountedNotRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good := "2b0c1a8e-1111-4a4a-8a8a-000000000010"
	now := time.Now().Unix()
	batch, err := json.Marshal([]any{
		map[string]any{"event": "processed", "sg_message_id": "good.filterdrecv-0", "timestamp": now, "oncebox_op": good, "email": "a@example.com"},
		map[string]any{"event": "processed", "sg_message_id": "nul.filterdrecv-0", "timestamp": now, "oncebox_op": good[:10] + "\u0000" + good[11:]},
		map[string]any{"event": "delivered", "sg_message_id": "long.filterdrecv-0", "timestamp": now, "oncebox_op": strings.Repeat("a", 6000)},
		"not an event",
		map[string]any{"event": "delivered", "sg_message_id": "ahead.filterdrecv-0", "timestamp": now + 3600, "oncebox_op": good},
		map[string]any{"event": "delivered", "sg_message_id": "nulid\u0000.filterdrecv-0", "timestamp": now, "oncebox_op": good},
	})
	require.NoError(t, err)
	sig, ts, err := fakesendgrid.SignEvents(e.sgEvents.Key, batch, time.Now())
	require.NoError(t, err)
	status, m := post(t, e.url+vendorevents.PathSendGrid, batch, http.Header{fakesendgrid.SignatureHeader: {sig}, fakesendgrid.TimestampHeader: {ts}})
	require.Equal(t, http.StatusOK, status, m)
	require.EqualValues(t, 1, m["stored"])
	require.EqualValues(t, 5, m["invalid"])
	require.Equal(t, 1, e.count(t, "SELECT count(*) FROM oncebox_vendor_event WHERE op_tag = $1", good))
	require.Equal(t, 5, e.obs.get("sendgrid/invalid"))
	require.Equal(t, 1, e.obs.get("sendgrid/orphan"), "the good event is kept (its tag names no op here)")

	for i, body := range [][]byte{
		stripeObjectEvent("evt_nul_meta", "pi_1", map[string]string{"oncebox_op": good, "note": "a\u0000b"}, time.Now()),
		stripeObjectEvent("evt_nul_id", "pi_\u00002", map[string]string{"oncebox_op": good}, time.Now()),
		stripeObjectEvent("evt_nul_tag", "pi_3", map[string]string{"oncebox_op": good + "\u0000"}, time.Now()),
		stripeObjectEvent("evt_ahead", "pi_4", map[string]string{"oncebox_op": good}, time.Now().Add(time.Hour)),
	} {
		status, m := post(t, e.url+vendorevents.PathStripe, body, http.Header{"Stripe-Signature": {fakestripe.SignPayload(stripeSecret, body, time.Now())}})
		require.Equal(t, http.StatusOK, status, m)
		require.EqualValues(t, 1, m["invalid"])
		require.Equal(t, i+1, e.obs.get("stripe/invalid"))
	}
	good2 := stripeObjectEvent("evt_good", "pi_5", map[string]string{"oncebox_op": good}, time.Now())
	status, m = post(t, e.url+vendorevents.PathStripe, good2, http.Header{"Stripe-Signature": {fakestripe.SignPayload(stripeSecret, good2, time.Now())}})
	require.Equal(t, http.StatusOK, status, m)
	require.EqualValues(t, 1, m["stored"])
	require.Equal(t, 2, e.count(t, "SELECT count(*) FROM oncebox_vendor_event"))
}

// TestFutureSignedTimestampsRefused: a request signed (as the vendor signs) with a
// timestamp an hour ahead is refused with 400 and says why; nothing is stored.
func TestFutureSignedTimestampsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tag := "2b0c1a8e-1111-4a4a-8a8a-000000000011"
	ahead := time.Now().Add(time.Hour)
	body := stripeObjectEvent("evt_future", "pi_1", map[string]string{"oncebox_op": tag}, time.Now())
	status, p := post(t, e.url+vendorevents.PathStripe, body, http.Header{"Stripe-Signature": {fakestripe.SignPayload(stripeSecret, body, ahead)}})
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "https://oncebox.dev/problems/invalid-signature", p["type"])
	require.Contains(t, p["detail"], "in the future, more than the 5m0s tolerated")

	sgBody := []byte(`[{"event":"processed","sg_message_id":"f.filterdrecv-0","timestamp":1,"oncebox_op":"` + tag + `"}]`)
	sig, ts, err := fakesendgrid.SignEvents(e.sgEvents.Key, sgBody, ahead)
	require.NoError(t, err)
	status, p = post(t, e.url+vendorevents.PathSendGrid, sgBody, http.Header{fakesendgrid.SignatureHeader: {sig}, fakesendgrid.TimestampHeader: {ts}})
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, p["detail"], "more than the 5m0s tolerated")
	require.Equal(t, 0, e.count(t, "SELECT count(*) FROM oncebox_vendor_event"))
}
