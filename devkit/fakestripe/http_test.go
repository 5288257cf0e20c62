package fakestripe_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/devkit/fakestripe"
)

func TestAuthRequired(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})

	for _, auth := range []string{"", "Bearer ", "Token sk_test_x"} {
		req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/payment_intents", strings.NewReader("amount=100&currency=usd"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", "key-1")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := h.srv.Client().Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "auth %q", auth)
		var e struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &e))
		require.Equal(t, "invalid_request_error", e.Error.Type)
	}
	require.Zero(t, h.fake.CreatedCount())

	// Nothing was stored under the key.
	pi, err := h.sc.PaymentIntents.New(&stripe.PaymentIntentParams{
		Amount: stripe.Int64(100), Currency: stripe.String("usd"),
		Params: stripe.Params{IdempotencyKey: stripe.String("key-1")},
	})
	require.NoError(t, err)
	require.Empty(t, pi.LastResponse.Header.Get("Idempotent-Replayed"))
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})

	_, err := h.sc.PaymentIntents.Get("pi_missing", nil)
	requireStripeError(t, err, http.StatusNotFound, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeResourceMissing)
	_, err = h.sc.Refunds.Get("re_missing", nil)
	requireStripeError(t, err, http.StatusNotFound, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeResourceMissing)
	_, err = h.sc.Customers.New(&stripe.CustomerParams{})
	requireStripeError(t, err, http.StatusNotFound, stripe.ErrorTypeInvalidRequest, "")

	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	require.Equal(t, http.StatusNotFound, getJSON(t, h, "/v2/nothing", &body))
	require.Contains(t, body.Error.Message, "Unrecognized request URL")

	// A known path under another method is unrecognized too, in JSON.
	req, err := http.NewRequest(http.MethodDelete, h.srv.URL+"/v1/payment_intents", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk_test_x")
	resp, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
}

func TestAddPaymentIntentAndByTag(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})

	pi, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 700))
	require.NoError(t, err)
	// Seed a duplicate, as a lost response followed by a resend under another
	// key would have made.
	h.fake.AddPaymentIntent(fakestripe.PaymentIntent{Amount: 700, Metadata: map[string]string{"oncebox_op": "op-1"}})
	_, err = h.sc.Refunds.New(refundParams("re-1", pi.ID, 0))
	require.NoError(t, err)

	pis, refunds := h.fake.ByTag("oncebox_op", "op-1")
	require.Len(t, pis, 2)
	require.Equal(t, pi.ID, pis[0].ID)
	require.Equal(t, "succeeded", pis[1].Status)
	require.Regexp(t, `^ch_`, pis[1].LatestCharge)
	require.Empty(t, refunds)
	_, refunds = h.fake.ByTag("oncebox_op", "re-1")
	require.Len(t, refunds, 1)
	require.Equal(t, int64(700), refunds[0].Amount)

	require.Equal(t, []string{pis[1].ID, pi.ID}, searchIDs(t, h, `metadata["oncebox_op"]:"op-1"`))
	require.Equal(t, 3, h.fake.CreatedCount())

	// Snapshots are copies.
	pis[0].Metadata["oncebox_op"] = "changed"
	again, _ := h.fake.ByTag("oncebox_op", "op-1")
	require.Len(t, again, 2)
}
