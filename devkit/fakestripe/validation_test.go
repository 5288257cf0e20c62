package fakestripe_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/devkit/fakestripe"
)

func TestMetadataLimits(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		metadata  map[string]string
		wantParam string // "" when accepted
	}{
		{name: "50 keys", metadata: manyKeys(50)},
		{name: "51 keys", metadata: manyKeys(51), wantParam: "metadata"},
		{name: "40-char key", metadata: map[string]string{strings.Repeat("k", 40): "v"}},
		{name: "41-char key", metadata: map[string]string{strings.Repeat("k", 41): "v"}, wantParam: "metadata[" + strings.Repeat("k", 41) + "]"},
		{name: "500-char value", metadata: map[string]string{"k": strings.Repeat("v", 500)}},
		{name: "501-char value", metadata: map[string]string{"k": strings.Repeat("v", 501)}, wantParam: "metadata[k]"},
		{name: "bracket in key", metadata: map[string]string{"a[b": "v"}, wantParam: "metadata[a[b]"},
		{name: "closing bracket in key", metadata: map[string]string{"a]b": "v"}, wantParam: "metadata[a]b]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fakestripe.Config{})
			params := piParams("key-1", "op-1", 100)
			params.Metadata = tt.metadata

			pi, err := h.sc.PaymentIntents.New(params)
			if tt.wantParam == "" {
				require.NoError(t, err)
				require.Equal(t, tt.metadata, pi.Metadata)
				require.Equal(t, 1, h.fake.CreatedCount())
				return
			}
			se := requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, "")
			require.Equal(t, tt.wantParam, se.Param)
			require.Zero(t, h.fake.CreatedCount())

			// Nothing was stored: the key is free for valid parameters.
			pi, err = h.sc.PaymentIntents.New(piParams("key-1", "op-1", 100))
			require.NoError(t, err)
			require.Empty(t, pi.LastResponse.Header.Get("Idempotent-Replayed"))
		})
	}
}

func manyKeys(n int) map[string]string {
	md := make(map[string]string, n)
	for i := range n {
		md[fmt.Sprintf("k%02d", i)] = "v"
	}
	return md
}

func TestPaymentIntentParamValidation(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		edit      func(p *stripe.PaymentIntentParams)
		wantParam string
		wantCode  stripe.ErrorCode
	}{
		{name: "missing amount", edit: func(p *stripe.PaymentIntentParams) { p.Amount = nil }, wantParam: "amount", wantCode: stripe.ErrorCodeParameterMissing},
		{name: "zero amount", edit: func(p *stripe.PaymentIntentParams) { p.Amount = stripe.Int64(0) }, wantParam: "amount", wantCode: stripe.ErrorCodeParameterInvalidInteger},
		{name: "missing currency", edit: func(p *stripe.PaymentIntentParams) { p.Currency = nil }, wantParam: "currency", wantCode: stripe.ErrorCodeParameterMissing},
		{name: "bad currency", edit: func(p *stripe.PaymentIntentParams) { p.Currency = stripe.String("dollars") }, wantParam: "currency"},
		{name: "confirm without payment method", edit: func(p *stripe.PaymentIntentParams) { p.PaymentMethod = nil }, wantParam: "payment_method", wantCode: stripe.ErrorCodePaymentIntentUnexpectedState},
		{name: "unknown parameter", edit: func(p *stripe.PaymentIntentParams) { p.AddExtra("amout", "1") }, wantParam: "amout", wantCode: stripe.ErrorCodeParameterUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fakestripe.Config{})
			params := piParams("key-1", "op-1", 100)
			tt.edit(params)
			_, err := h.sc.PaymentIntents.New(params)
			se := requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, tt.wantCode)
			require.Equal(t, tt.wantParam, se.Param)
			require.Zero(t, h.fake.CreatedCount())
		})
	}
}

func TestUnconfirmedStatuses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})

	withPM := &stripe.PaymentIntentParams{Amount: stripe.Int64(100), Currency: stripe.String("USD"), PaymentMethod: stripe.String("pm_card_visa")}
	pi, err := h.sc.PaymentIntents.New(withPM)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresConfirmation, pi.Status)
	require.Equal(t, stripe.Currency("usd"), pi.Currency)
	require.Nil(t, pi.LatestCharge)

	manual := piParams("", "op-1", 100)
	manual.CaptureMethod = stripe.String("manual")
	pi, err = h.sc.PaymentIntents.New(manual)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, pi.Status)
	require.Equal(t, int64(100), pi.AmountCapturable)
}
