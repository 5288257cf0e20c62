package vendorevents_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/doors/vendorevents"
)

// postStatus posts body with header and returns the status; a transport error fails t.
func postStatus(t *testing.T, url string, body []byte, h http.Header) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// FuzzStripeEvents posts arbitrary bodies signed as Stripe signs them (t=…,v1=HMAC),
// dated from an hour ago to an hour ahead: never a 5xx. `go test -run '^$' -fuzz
// FuzzStripeEvents ./vendorevents/`.
func FuzzStripeEvents(f *testing.F) {
	e := newEnv(f)
	tag := "2b0c1a8e-1111-4a4a-8a8a-000000000020"
	now := time.Now()
	f.Add(stripeObjectEvent("evt_1", "pi_1", map[string]string{"oncebox_op": tag}, now), int16(0))
	f.Add(stripeObjectEvent("evt_2", "pi_\u00002", map[string]string{"oncebox_op": tag, "note": "a\u0000b"}, now), int16(0))
	f.Add(stripeObjectEvent("evt_3", "pi_3", map[string]string{"oncebox_op": strings.Repeat("x", 6000)}, now.AddDate(9000, 0, 0)), int16(3600))
	f.Add(stripeEvent("evt_4", "refund.updated", tag), int16(-3600))
	f.Add([]byte(`{"id":"evt_5","object":"event","api_version":"2024-06-20","type":"payment_intent.succeeded","data":{"object":{"metadata":7}}}`), int16(1))
	f.Fuzz(func(t *testing.T, body []byte, offset int16) {
		at := time.Now().Add(time.Duration(offset) * time.Second)
		h := http.Header{"Stripe-Signature": {fakestripe.SignPayload(stripeSecret, body, at)}}
		if st := postStatus(t, e.url+vendorevents.PathStripe, body, h); st >= 500 {
			t.Fatalf("answered %d to %q", st, body)
		}
	})
}

// FuzzSendGridEvents posts arbitrary bodies signed as SendGrid signs its Event Webhook
// (ECDSA P-256 over timestamp + body): never a 5xx.
func FuzzSendGridEvents(f *testing.F) {
	e := newEnv(f)
	tag := "2b0c1a8e-1111-4a4a-8a8a-000000000021"
	now := time.Now().Unix()
	seed := func(v any) []byte { b, _ := json.Marshal(v); return b }
	f.Add(seed([]any{map[string]any{"event": "processed", "sg_message_id": "m.filterdrecv-0", "timestamp": now, "oncebox_op": tag}}))
	f.Add(seed([]any{map[string]any{"event": "delivered", "sg_message_id": "m\u0000.x", "timestamp": now, "oncebox_op": tag + "\u0000"},
		map[string]any{"event": "bounce", "sg_message_id": "n.x", "timestamp": 1e30, "oncebox_op": strings.Repeat("a", 6000)}, 5, nil}))
	f.Add([]byte(`[{"event":"open","sg_message_id":"o.x","timestamp":-62135596801,"oncebox_op":"` + tag + `"}]`))
	f.Add([]byte(`[{"event":["x"],"oncebox_op":{"a":1}}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sig, ts, err := fakesendgrid.SignEvents(e.sgEvents.Key, body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{fakesendgrid.SignatureHeader: {sig}, fakesendgrid.TimestampHeader: {ts}}
		if st := postStatus(t, e.url+vendorevents.PathSendGrid, body, h); st >= 500 {
			t.Fatalf("answered %d to %q", st, body)
		}
	})
}
