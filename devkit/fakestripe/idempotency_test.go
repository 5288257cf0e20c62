package fakestripe_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/devkit/fakestripe"
)

func TestCreateAndReplay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})

	first, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 1500))
	require.NoError(t, err)
	require.Regexp(t, `^pi_`, first.ID)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, first.Status)
	require.Equal(t, int64(1500), first.Amount)
	require.Equal(t, int64(1500), first.AmountReceived)
	require.Equal(t, "op-1", first.Metadata["oncebox_op"])
	require.NotNil(t, first.LatestCharge)
	require.Regexp(t, `^ch_`, first.LatestCharge.ID)
	require.Equal(t, "key-1", first.LastResponse.Header.Get("Idempotency-Key"))
	require.Empty(t, first.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Regexp(t, `^req_`, first.LastResponse.RequestID)

	again, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 1500))
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, "true", again.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, "key-1", again.LastResponse.Header.Get("Idempotency-Key"))
	require.Equal(t, first.LastResponse.RequestID, again.LastResponse.Header.Get("Original-Request"))
	require.NotEqual(t, first.LastResponse.RequestID, again.LastResponse.RequestID)

	require.Equal(t, 1, h.fake.CreatedCount())
	require.Equal(t, 2, h.fake.Requests())
	pis := h.fake.PaymentIntents()
	require.Len(t, pis, 1)
	require.Equal(t, first.ID, pis[0].ID)
	require.Equal(t, first.LatestCharge.ID, pis[0].LatestCharge)

	got, err := h.sc.PaymentIntents.Get(first.ID, nil)
	require.NoError(t, err)
	require.Equal(t, first.ID, got.ID)
	require.Equal(t, "op-1", got.Metadata["oncebox_op"])
}

func TestPostWithoutKeyIsExecutedEveryTime(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})

	// stripe-go invents a key for every call; a raw POST carries none.
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/payment_intents",
			strings.NewReader("amount=100&currency=usd"))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer sk_test_x")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := h.srv.Client().Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Empty(t, resp.Header.Get("Idempotency-Key"))
	}
	require.Equal(t, 2, h.fake.CreatedCount())
	for _, pi := range h.fake.PaymentIntents() {
		require.Equal(t, "requires_payment_method", pi.Status)
	}
}

func TestSameKeyOtherParamsIsIdempotencyError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})

	first, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 1500))
	require.NoError(t, err)

	_, err = h.sc.PaymentIntents.New(piParams("key-1", "op-1", 1600))
	requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeIdempotency, "")

	// Another endpoint under the same key is refused too.
	rp := &stripe.RefundParams{PaymentIntent: stripe.String(first.ID)}
	rp.SetIdempotencyKey("key-1")
	_, err = h.sc.Refunds.New(rp)
	requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeIdempotency, "")

	require.Equal(t, 1, h.fake.CreatedCount())
	require.Empty(t, h.fake.Refunds())

	// The original request still replays.
	again, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 1500))
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)
}

func TestConcurrentSameKeyIsInUse(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{HangFor: 10 * time.Second})
	h.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultHang})

	var (
		wg       sync.WaitGroup
		firstPI  *stripe.PaymentIntent
		firstErr error
	)
	wg.Go(func() {
		firstPI, firstErr = h.sc.PaymentIntents.New(piParams("key-1", "op-1", 1500))
	})
	// The hung request has created its object but not answered yet.
	require.Eventually(t, func() bool { return h.fake.CreatedCount() == 1 }, 5*time.Second, 5*time.Millisecond)

	_, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 1500))
	requireStripeError(t, err, http.StatusConflict, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeIdempotencyKeyInUse)
	require.Equal(t, 1, h.fake.CreatedCount())

	h.fake.ReleaseHangs()
	wg.Wait()
	require.NoError(t, firstErr)
	require.Empty(t, firstPI.LastResponse.Header.Get("Idempotent-Replayed"))

	// Once the first request has answered, the key replays its result.
	again, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 1500))
	require.NoError(t, err)
	require.Equal(t, firstPI.ID, again.ID)
	require.Equal(t, "true", again.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, 1, h.fake.CreatedCount())
}

func TestDeclineIsStoredAndReplayed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})

	for _, pm := range []string{"pm_card_chargeDeclined", "pm_card_visa_chargeDeclined"} {
		params := piParams("key-"+pm, "op-"+pm, 2000)
		params.PaymentMethod = stripe.String(pm)

		_, err := h.sc.PaymentIntents.New(params)
		se := requireStripeError(t, err, http.StatusPaymentRequired, stripe.ErrorTypeCard, stripe.ErrorCodeCardDeclined)
		require.Equal(t, stripe.DeclineCodeGenericDecline, se.DeclineCode)
		var cardErr *stripe.CardError
		require.ErrorAs(t, err, &cardErr)
		require.NotNil(t, se.PaymentIntent)
		require.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, se.PaymentIntent.Status)
		require.Empty(t, se.LastResponse.Header.Get("Idempotent-Replayed"))

		_, err = h.sc.PaymentIntents.New(params)
		replayed := requireStripeError(t, err, http.StatusPaymentRequired, stripe.ErrorTypeCard, stripe.ErrorCodeCardDeclined)
		require.Equal(t, "true", replayed.LastResponse.Header.Get("Idempotent-Replayed"))
		require.Equal(t, se.PaymentIntent.ID, replayed.PaymentIntent.ID)

		// As on Stripe, the declined attempt leaves a payment intent behind.
		pis, _ := h.fake.ByTag("oncebox_op", "op-"+pm)
		require.Len(t, pis, 1)
		require.Equal(t, "requires_payment_method", pis[0].Status)
	}
	require.Equal(t, 2, h.fake.CreatedCount())
}

func TestExpireIdempotencyKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})

	first, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 1500))
	require.NoError(t, err)

	h.fake.ExpireIdempotencyKeys()

	second, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 1500))
	require.NoError(t, err)
	require.NotEqual(t, first.ID, second.ID)
	require.Empty(t, second.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, 2, h.fake.CreatedCount())

	pis, _ := h.fake.ByTag("oncebox_op", "op-1")
	require.Len(t, pis, 2, "the expired key let a duplicate through")
}
