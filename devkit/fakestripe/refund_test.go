package fakestripe_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/devkit/fakestripe"
)

func refundParams(key, piID string, amount int64) *stripe.RefundParams {
	p := &stripe.RefundParams{PaymentIntent: stripe.String(piID)}
	if amount > 0 {
		p.Amount = stripe.Int64(amount)
	}
	p.AddMetadata("oncebox_op", key)
	p.SetIdempotencyKey(key)
	return p
}

func TestRefundPartialTwiceThenOverRefundRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})
	pi, err := h.sc.PaymentIntents.New(piParams("pi-key", "op-pi", 1000))
	require.NoError(t, err)

	r1, err := h.sc.Refunds.New(refundParams("re-1", pi.ID, 300))
	require.NoError(t, err)
	require.Regexp(t, `^re_`, r1.ID)
	require.Equal(t, stripe.RefundStatusSucceeded, r1.Status)
	require.Equal(t, int64(300), r1.Amount)
	require.Equal(t, pi.ID, r1.PaymentIntent.ID)
	require.Equal(t, pi.LatestCharge.ID, r1.Charge.ID)

	r2, err := h.sc.Refunds.New(refundParams("re-2", pi.ID, 300))
	require.NoError(t, err)
	require.NotEqual(t, r1.ID, r2.ID)

	// A replay of the first refund does not refund again.
	r1again, err := h.sc.Refunds.New(refundParams("re-1", pi.ID, 300))
	require.NoError(t, err)
	require.Equal(t, r1.ID, r1again.ID)
	require.Equal(t, int64(600), h.fake.PaymentIntents()[0].AmountRefunded)

	// 500 > 400 left: refused, and the refusal is stored under its key.
	_, err = h.sc.Refunds.New(refundParams("re-3", pi.ID, 500))
	se := requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, "")
	require.Equal(t, "amount", se.Param)
	require.Contains(t, se.Msg, "Refund amount ($5.00) is greater than unrefunded amount on charge ($4.00)", "money as Stripe writes it")
	_, err = h.sc.Refunds.New(refundParams("re-3", pi.ID, 500))
	se = requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, "")
	require.Equal(t, "true", se.LastResponse.Header.Get("Idempotent-Replayed"))

	// Without an amount, the refund takes what is left, by charge this time.
	rest := &stripe.RefundParams{Charge: stripe.String(pi.LatestCharge.ID)}
	rest.SetIdempotencyKey("re-4")
	r4, err := h.sc.Refunds.New(rest)
	require.NoError(t, err)
	require.Equal(t, int64(400), r4.Amount)

	_, err = h.sc.Refunds.New(refundParams("re-5", pi.ID, 0))
	requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeChargeAlreadyRefunded)

	require.Equal(t, int64(1000), h.fake.PaymentIntents()[0].AmountRefunded)
	refunds := h.fake.Refunds()
	require.Len(t, refunds, 3)
	require.Equal(t, []string{r1.ID, r2.ID, r4.ID}, []string{refunds[0].ID, refunds[1].ID, refunds[2].ID})
	require.Equal(t, 4, h.fake.CreatedCount())

	got, err := h.sc.Refunds.Get(r2.ID, nil)
	require.NoError(t, err)
	require.Equal(t, int64(300), got.Amount)
	require.Equal(t, "re-2", got.Metadata["oncebox_op"])

	ch, err := h.sc.Charges.Get(pi.LatestCharge.ID, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1000), ch.AmountRefunded)
	require.True(t, ch.Refunded)
	require.Equal(t, pi.ID, ch.PaymentIntent.ID)
}

func TestRefundRefusedWithoutSuccessfulCharge(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})
	unconfirmed := &stripe.PaymentIntentParams{Amount: stripe.Int64(500), Currency: stripe.String("eur")}
	pi, err := h.sc.PaymentIntents.New(unconfirmed)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, pi.Status)

	_, err = h.sc.Refunds.New(refundParams("re-1", pi.ID, 0))
	requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeChargeNotRefundable)

	_, err = h.sc.Refunds.New(refundParams("re-2", "pi_missing", 0))
	se := requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeResourceMissing)
	require.Equal(t, "payment_intent", se.Param)

	// Neither payment_intent nor charge: a validation error, not stored.
	bare := &stripe.RefundParams{}
	bare.SetIdempotencyKey("re-3")
	_, err = h.sc.Refunds.New(bare)
	requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeParameterMissing)

	require.Empty(t, h.fake.Refunds())
}
