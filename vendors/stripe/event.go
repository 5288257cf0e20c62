package stripe

import (
	"encoding/json"
	"fmt"
	"strings"

	stripego "github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/vendorapi"
)

// The object types EventObject reads.
const (
	// ObjectPaymentIntent is the object type of payment_intent.* events.
	ObjectPaymentIntent = "payment_intent"
	// ObjectRefund is the object type of refund.* and charge.refund.updated events.
	ObjectRefund = "refund"
)

// EventObject reads the object a webhook event carries, as Lookup would report it
// (its Summary holds no secret: never the client_secret): the PaymentIntent of a
// payment_intent.* event, the Refund of a refund.* or charge.refund.updated event.
// ok is false for any other event, which oncebox does not use.
func EventObject(ev *stripego.Event) (obj vendorapi.VendorObject, objectType string, ok bool, err error) {
	if ev.Data == nil || len(ev.Data.Raw) == 0 {
		return obj, "", false, fmt.Errorf("stripe: event %s (%s) carries no object", ev.ID, ev.Type)
	}
	t := string(ev.Type)
	switch {
	case strings.HasPrefix(t, "payment_intent."):
		var pi stripego.PaymentIntent
		if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
			return obj, "", false, fmt.Errorf("stripe: event %s (%s): decode payment intent: %w", ev.ID, t, err)
		}
		return paymentIntentObject(&pi), ObjectPaymentIntent, true, nil
	case strings.HasPrefix(t, "refund.") || t == "charge.refund.updated":
		var re stripego.Refund
		if err := json.Unmarshal(ev.Data.Raw, &re); err != nil {
			return obj, "", false, fmt.Errorf("stripe: event %s (%s): decode refund: %w", ev.ID, t, err)
		}
		return refundObject(&re), ObjectRefund, true, nil
	}
	return obj, "", false, nil
}
