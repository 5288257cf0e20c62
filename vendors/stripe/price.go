package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	stripego "github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/tools"
)

// PriceRefund returns what a stripe.refund without an amount will refund, and its
// currency: what remains refundable of its payment, as Stripe holds it now (the
// charge's captured amount minus what was refunded already; for a payment_intent, its
// latest charge's). It is the refund tool's vendorapi.Tool.Price, so that an amount budget
// counts a full refund at what it will move. It reads the account ctx carries
// (vendorapi.WithAccount: the new op's). A payment without a captured charge is an
// error: the amount cannot be known, and the op waits for approval.
func (v *Vendor) PriceRefund(ctx context.Context, args json.RawMessage) (int64, string, error) {
	a, err := tools.DecodeRefund(args)
	if err != nil {
		return 0, "", err
	}
	chargeID := a.Charge
	c := v.connFrom(ctx)
	if a.PaymentIntent != "" {
		params := &stripego.PaymentIntentParams{}
		params.Context = ctx
		c.on(params)
		pi, err := c.api.PaymentIntents.Get(a.PaymentIntent, params)
		if err != nil {
			return 0, "", fmt.Errorf("stripe: retrieve payment intent %s: %w", a.PaymentIntent, v.priceErr(err))
		}
		if pi.LatestCharge == nil || pi.LatestCharge.ID == "" {
			return 0, "", fmt.Errorf("stripe: payment intent %s has no charge to refund", a.PaymentIntent)
		}
		chargeID = pi.LatestCharge.ID
	}
	params := &stripego.ChargeParams{}
	params.Context = ctx
	c.on(params)
	ch, err := c.api.Charges.Get(chargeID, params)
	if err != nil {
		return 0, "", fmt.Errorf("stripe: retrieve charge %s: %w", chargeID, v.priceErr(err))
	}
	if !ch.Captured {
		return 0, "", fmt.Errorf("stripe: charge %s is not captured", chargeID)
	}
	left := ch.AmountCaptured - ch.AmountRefunded
	if left <= 0 {
		return 0, "", fmt.Errorf("stripe: charge %s has nothing left to refund", chargeID)
	}
	return left, string(ch.Currency), nil
}

// priceErr keeps a Stripe error's type and code, never its message (which may echo
// the request).
func (v *Vendor) priceErr(err error) error {
	var se *stripego.Error
	if errors.As(err, &se) {
		return fmt.Errorf("%s (%s, HTTP %d)", se.Type, se.Code, se.HTTPStatusCode)
	}
	return err
}
