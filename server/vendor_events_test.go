package server_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendoraccount"
)

func TestVendorEventEndpointsFollowTheConfig(t *testing.T) {
	t.Parallel()
	cfg, pool := newConfig(t)
	cfg.Roles = server.Roles{API: true}
	cfg.StripeWebhookSecret = "whsec_server_test"
	_, pub, err := fakesendgrid.NewEventKey()
	require.NoError(t, err)
	cfg.SendGridEventPublicKey = pub
	s, err := server.New(context.Background(), cfg, nil)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	body := `{"id":"evt_s1","object":"event","api_version":"2024-06-20","created":` + itoa(time.Now().Unix()) +
		`,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_s1","object":"payment_intent","status":"succeeded","metadata":{"oncebox_op":"0b6f3c1e-2d4a-4f7b-9c8e-5a1d2e3f4a5b"}}}}`
	send := func(path, sig string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		if sig != "" {
			req.Header.Set("Stripe-Signature", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, b := send("/v1/vendor-events/stripe", "")
	require.Equal(t, http.StatusBadRequest, status, b)
	require.Contains(t, b, "invalid-signature")
	status, b = send("/v1/vendor-events/stripe", fakestripe.SignPayload(cfg.StripeWebhookSecret, []byte(body), time.Now()))
	require.Equal(t, http.StatusOK, status, b)
	require.Contains(t, b, `"stored":1`)
	status, b = send("/v1/vendor-events/sendgrid", "")
	require.Equal(t, http.StatusBadRequest, status, b) // configured: a missing signature is refused
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM oncebox_vendor_event").Scan(&n))
	require.Equal(t, 1, n)

	// Without the secret the endpoint says so, without a 5xx.
	cfg2, _ := newConfig(t)
	cfg2.Roles = server.Roles{API: true}
	s2, err := server.New(context.Background(), cfg2, nil)
	require.NoError(t, err)
	t.Cleanup(s2.Close)
	rec := httptest.NewRecorder()
	s2.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/vendor-events/stripe", strings.NewReader(body)))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Contains(t, rec.Body.String(), "vendor-events-not-configured")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestTenantStripeEndpointUsesItsSealedSecret: a tenant's own Stripe endpoint verifies
// with the signing secret set for it (stored sealed), refuses the platform's, and
// stores its events as from the tenant's own account; a tenant without one has none.
func TestTenantStripeEndpointUsesItsSealedSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, pool := newConfig(t)
	cfg.Roles = server.Roles{API: true}
	cfg.StripeWebhookSecret = "whsec_platform"
	cfg.SealKey = testSealKey()
	s, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	_, _, err = tenant.NewStore(pool).Create(ctx, "plain")
	require.NoError(t, err)
	seal, err := base64.StdEncoding.DecodeString(cfg.SealKey)
	require.NoError(t, err)
	settings, err := vendoraccount.New(pool, seal)
	require.NoError(t, err)
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: tn.ID, Vendor: vendoraccount.StripeEvents,
		APIKey: "whsec_acme_own", By: "test"}))

	body := `{"id":"evt_t1","object":"event","api_version":"2024-06-20","created":` + itoa(time.Now().Unix()) +
		`,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_t1","object":"payment_intent","status":"succeeded","metadata":{"oncebox_op":"0b6f3c1e-2d4a-4f7b-9c8e-5a1d2e3f4a5b"}}}}`
	send := func(path, secret string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Stripe-Signature", fakestripe.SignPayload(secret, []byte(body), time.Now()))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, b := send("/v1/vendor-events/stripe/tenants/acme", "whsec_platform")
	require.Equal(t, http.StatusBadRequest, status, b)
	require.Contains(t, b, "invalid-signature")
	status, b = send("/v1/vendor-events/stripe/tenants/plain", "whsec_platform")
	require.Equal(t, http.StatusNotFound, status, b)
	require.Contains(t, b, "vendor-events-not-configured")
	status, b = send("/v1/vendor-events/stripe/tenants/acme", "whsec_acme_own")
	require.Equal(t, http.StatusOK, status, b)
	require.Contains(t, b, `"stored":1`)
	var account string
	require.NoError(t, pool.QueryRow(ctx, "SELECT account FROM oncebox_vendor_event WHERE event_id = 'evt_t1'").Scan(&account))
	require.Equal(t, "tenant:"+itoa(tn.ID), account)
	var clear int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM oncebox_tenant_vendor_key
		WHERE position('whsec_acme_own'::bytea IN sealed) > 0`).Scan(&clear))
	require.Zero(t, clear, "the secret is stored sealed")
}

// TestTenantStripeEventsSettleItsOpsWithoutThePlatformSecret: on an installation with no
// STRIPE_WEBHOOK_SECRET, the events of a tenant on its own Stripe key, verified with its
// own signing secret, are a lookup source like the installation's: the reconciler
// settles the tenant's unknown op from them while Stripe cannot be asked.
func TestTenantStripeEventsSettleItsOpsWithoutThePlatformSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := fakestripe.New(fakestripe.Config{})
	fake.AddAccount("acct_OwnKey1", "sk_test_acme_own")
	var down atomic.Bool
	stripeSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"type":"api_error","message":"outage"}}`)
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(stripeSrv.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.Roles = server.Roles{API: true}
	cfg.SealKey = testSealKey()
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_platform", stripeSrv.URL
	srv, base := runServer(t, ctx, cfg)
	tn, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	seal, err := base64.StdEncoding.DecodeString(cfg.SealKey)
	require.NoError(t, err)
	settings, err := vendoraccount.New(pool, seal)
	require.NoError(t, err)
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: tn.ID, Vendor: "stripe", APIKey: "sk_test_acme_own", By: "test"}))
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: tn.ID, Vendor: vendoraccount.StripeEvents, APIKey: "whsec_acme_own", By: "test"}))

	req, _ := http.NewRequest(http.MethodPost, base+"/v1/ops", strings.NewReader(
		`{"tool":"stripe.payment_intent","args":{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", "own-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var opID string
	require.NoError(t, pool.QueryRow(ctx, `UPDATE oncebox_op SET status = 'unknown', vendor_ref = 'pi_own1'
		WHERE idempotency_key = 'own-1' RETURNING id::text`).Scan(&opID))

	body := `{"id":"evt_own1","object":"event","api_version":"2024-06-20","created":` + itoa(time.Now().Unix()) +
		`,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_own1","object":"payment_intent","status":"succeeded","amount":2000,"currency":"usd","created":` +
		itoa(time.Now().Unix()) + `,"metadata":{"oncebox_op":"` + opID + `"}}}}`
	ev, _ := http.NewRequest(http.MethodPost, base+"/v1/vendor-events/stripe/tenants/acme", strings.NewReader(body))
	ev.Header.Set("Stripe-Signature", fakestripe.SignPayload("whsec_acme_own", []byte(body), time.Now()))
	resp, err = http.DefaultClient.Do(ev)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))

	down.Store(true)
	_, err = srv.Outbox().ReconcileOnce(ctx)
	require.NoError(t, err)
	var status string
	require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM oncebox_op WHERE id = $1`, opID).Scan(&status))
	require.Equal(t, "succeeded", status, "the tenant's own events settled its op while Stripe was down")
}
