package fakestripe_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/testkit/fakeclock"
)

// harness is one fake behind an httptest.Server and a stripe-go client.
type harness struct {
	fake *fakestripe.Server
	srv  *httptest.Server
	sc   *client.API
}

// newHarness starts a fake with cfg. Its client uses one connection per
// request, so that a dropped connection reaches the caller instead of being
// resent by net/http (see the package documentation).
func newHarness(t *testing.T, cfg fakestripe.Config) *harness {
	t.Helper()
	fake := fakestripe.New(cfg)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	t.Cleanup(fake.ReleaseHangs) // Runs first: frees hung handlers before Close waits.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	return &harness{fake: fake, srv: srv, sc: newClient(srv.URL, hc)}
}

// newClient builds a stripe-go client without globals and without retries.
func newClient(url string, hc *http.Client) *client.API {
	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(url),
		HTTPClient:        hc,
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return client.New("sk_test_x", &stripe.Backends{API: b, Connect: b, Uploads: b})
}

// piParams returns confirmed payment intent parameters under key, tagged with
// oncebox_op=op.
func piParams(key, op string, amount int64) *stripe.PaymentIntentParams {
	p := &stripe.PaymentIntentParams{
		Amount:        stripe.Int64(amount),
		Currency:      stripe.String("usd"),
		PaymentMethod: stripe.String("pm_card_visa"),
		Confirm:       stripe.Bool(true),
	}
	p.AddMetadata("oncebox_op", op)
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// requireStripeError asserts that err is a *stripe.Error with this status,
// type and code, and returns it.
func requireStripeError(t *testing.T, err error, status int, typ stripe.ErrorType, code stripe.ErrorCode) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, status, se.HTTPStatusCode, "status of %v", se)
	require.Equal(t, typ, se.Type, "type of %v", se)
	require.Equal(t, code, se.Code, "code of %v", se)
	require.Regexp(t, `^req_`, se.RequestID)
	return se
}

// requireNetworkError asserts that err is a transport failure, not an answer.
func requireNetworkError(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	var se *stripe.Error
	require.False(t, errors.As(err, &se), "expected a network error, got a Stripe answer: %v", err)
}

// newClock returns a controllable Config.Now.
func newClock() *fakeclock.Clock { return fakeclock.New(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)) }
