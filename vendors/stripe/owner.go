package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	stripego "github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/vendorapi"
)

// PaymentIntentTag returns the op a PaymentIntent is tagged with (its
// metadata[oncebox_op]), or "" when it has none or Stripe does not know it. It is the
// refund tool's vendorapi.ObjectArg.Tag for payment_intent: a payment made by an op whose
// answer was lost is still its tenant's. An error means Stripe could not be asked. It
// reads the account ctx carries (vendorapi.WithAccount: the new op's).
func (v *Vendor) PaymentIntentTag(ctx context.Context, id string) (string, error) {
	params := &stripego.PaymentIntentParams{}
	params.Context = ctx
	c := v.connFrom(ctx)
	c.on(params)
	pi, err := c.api.PaymentIntents.Get(id, params)
	if err != nil {
		return "", v.tagErr("payment intent", id, err)
	}
	return pi.Metadata[vendorapi.TagKey], nil
}

// ChargeTag returns the op a Charge is tagged with, through its PaymentIntent (the op
// made the PaymentIntent, and Stripe the charge), or the charge's own tag when it has no
// PaymentIntent; "" when neither is tagged or Stripe does not know the charge. It is
// the refund tool's vendorapi.ObjectArg.Tag for charge.
func (v *Vendor) ChargeTag(ctx context.Context, id string) (string, error) {
	params := &stripego.ChargeParams{}
	params.Context = ctx
	c := v.connFrom(ctx)
	c.on(params)
	ch, err := c.api.Charges.Get(id, params)
	if err != nil {
		return "", v.tagErr("charge", id, err)
	}
	if ch.PaymentIntent != nil && ch.PaymentIntent.ID != "" {
		return v.PaymentIntentTag(ctx, ch.PaymentIntent.ID)
	}
	return ch.Metadata[vendorapi.TagKey], nil
}

// tagErr is nil for an object Stripe does not know (it has no tag, so it is nobody's),
// and otherwise the error with Stripe's type and code, never its message.
func (v *Vendor) tagErr(what, id string, err error) error {
	var se *stripego.Error
	if errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound {
		return nil
	}
	return fmt.Errorf("stripe: retrieve %s %s: %w", what, id, v.priceErr(err))
}
