package vendorevents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/finance"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

func stripeEvent(id, typ, opTag string) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "api_version": "2024-06-20", "created": time.Now().Unix(),
		"type": typ, "data": map[string]any{"object": map[string]any{"id": "pi_123", "object": "payment_intent", "amount": 500,
			"currency": "usd", "status": "succeeded", "created": time.Now().Unix(), "client_secret": "pi_123_secret_shh",
			"metadata": map[string]string{"oncebox_op": opTag}}}})
	return b
}

func post(t *testing.T, url string, body []byte, h http.Header) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	if resp.StatusCode != http.StatusOK {
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, m
}

func TestSignatureRefusedStoresNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := stripeEvent("evt_1", "payment_intent.succeeded", "2b0c1a8e-1111-4a4a-8a8a-000000000001")
	otherKey, _, err := fakesendgrid.NewEventKey()
	require.NoError(t, err)
	sgBody := []byte(`[{"event":"processed","sg_message_id":"abc.filterdrecv-0","timestamp":1,"oncebox_op":"x"}]`)
	sign := func(key any, at time.Time) http.Header {
		sig, ts, err := fakesendgrid.SignEvents(otherKey, sgBody, at)
		require.NoError(t, err)
		if key == nil {
			sig = ""
		}
		return http.Header{fakesendgrid.SignatureHeader: {sig}, fakesendgrid.TimestampHeader: {ts}}
	}
	cases := []struct {
		name, path string
		body       []byte
		h          http.Header
	}{
		{"stripe missing", vendorevents.PathStripe, body, nil},
		{"stripe wrong secret", vendorevents.PathStripe, body, http.Header{"Stripe-Signature": {fakestripe.SignPayload("whsec_other", body, time.Now())}}},
		{"stripe too old", vendorevents.PathStripe, body, http.Header{"Stripe-Signature": {fakestripe.SignPayload(stripeSecret, body, time.Now().Add(-time.Hour))}}},
		{"stripe body changed", vendorevents.PathStripe, bytes.Replace(body, []byte("500"), []byte("900"), 1),
			http.Header{"Stripe-Signature": {fakestripe.SignPayload(stripeSecret, body, time.Now())}}},
		{"sendgrid missing", vendorevents.PathSendGrid, sgBody, sign(nil, time.Now())},
		{"sendgrid other key", vendorevents.PathSendGrid, sgBody, sign(otherKey, time.Now())},
		{"sendgrid garbage", vendorevents.PathSendGrid, sgBody, http.Header{fakesendgrid.SignatureHeader: {"bm90IGEgc2ln"},
			fakesendgrid.TimestampHeader: {"1"}}},
	}
	for _, c := range cases {
		status, p := post(t, e.url+c.path, c.body, c.h)
		require.Equal(t, http.StatusBadRequest, status, c.name)
		require.Equal(t, "https://oncebox.dev/problems/invalid-signature", p["type"], c.name)
		require.NotEmpty(t, p["detail"], c.name)
		require.NotContains(t, p["detail"], stripeSecret, c.name)
	}
	require.Equal(t, 0, e.count(t, "SELECT count(*) FROM oncebox_vendor_event"))
	require.Equal(t, 4, e.obs.get("stripe/refused"))
	require.Equal(t, 3, e.obs.get("sendgrid/refused"))

	// Neither a GET nor an unconfigured vendor is a 5xx.
	resp, err := http.Get(e.url + vendorevents.PathStripe)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestStripeRedeliveryStoredOnceWithoutSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tag := "2b0c1a8e-1111-4a4a-8a8a-000000000002"
	body := stripeEvent("evt_dup", "payment_intent.succeeded", tag)
	for i := range 3 {
		status, m := post(t, e.url+vendorevents.PathStripe, body,
			http.Header{"Stripe-Signature": {fakestripe.SignPayload(stripeSecret, body, time.Now())}})
		require.Equal(t, http.StatusOK, status)
		require.EqualValues(t, min(i, 1), m["duplicates"])
	}
	require.Equal(t, 1, e.count(t, "SELECT count(*) FROM oncebox_vendor_event"))
	require.Equal(t, 2, e.obs.get("stripe/duplicate"))
	// The stored summary is oncebox's own: no client_secret.
	require.Equal(t, 0, e.count(t, "SELECT count(*) FROM oncebox_vendor_event WHERE summary::text LIKE '%secret%'"))
}

func TestSendGridRedeliveriesStoredOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.sgEvents
	cfg.Config.DuplicateRate = 1 // every batch delivered twice, with new sg_event_ids
	mail := e.withSendGrid(t, &cfg)
	e.start(t, mail)
	op := e.enqueue(t, "mail-dup", "sendgrid.mail", mailArgs())
	e.waitStatus(t, op.ID, "succeeded")
	require.Eventually(t, func() bool {
		pending, delivered, _ := e.sgFake.EventStats()
		return pending == 0 && delivered == 2
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 2, e.count(t, "SELECT count(*) FROM oncebox_vendor_event WHERE op_tag = $1", op.ID),
		"processed and delivered, each once although each was delivered twice")
	require.Equal(t, 2, e.obs.get("sendgrid/duplicate"))
	require.Equal(t, 0, e.count(t, "SELECT count(*) FROM oncebox_vendor_event WHERE summary::text LIKE '%ada@%'"), "no address stored")
}

func TestOrphanEventKeptAndReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	orphan := "2b0c1a8e-1111-4a4a-8a8a-0000000000ff" // names no op
	body := stripeEvent("evt_orphan", "payment_intent.succeeded", orphan)
	status, m := post(t, e.url+vendorevents.PathStripe, body, http.Header{"Stripe-Signature": {fakestripe.SignPayload(stripeSecret, body, time.Now())}})
	require.Equal(t, http.StatusOK, status)
	require.EqualValues(t, 1, m["orphans"])
	untagged := stripeEvent("evt_untagged", "payment_intent.succeeded", "")
	status, m = post(t, e.url+vendorevents.PathStripe, untagged, http.Header{"Stripe-Signature": {fakestripe.SignPayload(stripeSecret, untagged, time.Now())}})
	require.Equal(t, http.StatusOK, status)
	require.EqualValues(t, 1, m["untagged"])

	require.Equal(t, 1, e.count(t, "SELECT count(*) FROM oncebox_vendor_event WHERE orphan"))
	require.Equal(t, 1, e.obs.get("stripe/orphan"))
	require.Equal(t, 1, e.obs.get("stripe/untagged"))
	rep, err := finance.BuildReport(context.Background(), e.pool, finance.ReportParams{
		Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Minute), Events: e.store})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"stripe": 1}, rep.OrphanEvents)
	var out strings.Builder
	require.NoError(t, rep.WriteJSON(&out))
	require.Contains(t, out.String(), `"orphan_events"`)
	out.Reset()
	require.NoError(t, rep.WriteTotalsCSV(&out))
	require.Contains(t, out.String(), "orphan_events,,stripe,,1,")
}

func TestBadSendGridKeyRefusedAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, k := range []string{"not base64!", "aGVsbG8=", e.sgKeyB64[:20]} {
		_, err := vendorevents.NewHandler(vendorevents.HandlerConfig{Store: e.store, SendGridPublicKey: k})
		require.Error(t, err)
		require.Contains(t, err.Error(), "SENDGRID_EVENT_PUBLIC_KEY")
	}
}

func TestStoreDownAnswers503WithRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pool, err := pgxpool.New(context.Background(), dbtest.ConnString(t, e.pool))
	require.NoError(t, err)
	store, err := vendorevents.New(vendorevents.Config{Pool: pool})
	require.NoError(t, err)
	h, err := vendorevents.NewHandler(vendorevents.HandlerConfig{Store: store, StripeSecret: stripeSecret})
	require.NoError(t, err)
	pool.Close() // the database is gone
	body := stripeEvent("evt_down", "payment_intent.succeeded", "2b0c1a8e-1111-4a4a-8a8a-000000000003")
	req := httptest.NewRequest(http.MethodPost, vendorevents.PathStripe, bytes.NewReader(body))
	req.Header.Set("Stripe-Signature", fakestripe.SignPayload(stripeSecret, body, time.Now()))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "not the request's fault: the vendor sends it again")
	require.Equal(t, "5", rec.Header().Get("Retry-After"))
	require.Contains(t, rec.Body.String(), "store-unavailable")
}
