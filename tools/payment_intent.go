package tools

import (
	"encoding/json"
	"fmt"

	"github.com/oncebox/oncebox/protocol"
)

// maxDescriptionLen is Stripe's limit on a PaymentIntent's description.
const maxDescriptionLen = 1000

var paymentIntentFields = []string{"amount", "currency", "customer", "payment_method", "confirm", "description", "metadata"}

// DecodePaymentIntent decodes and validates the arguments of stripe.payment_intent.
// Unknown fields are refused. Its errors are *vendorapi.ValidationError.
func DecodePaymentIntent(args json.RawMessage) (protocol.PaymentIntentArgs, error) {
	f, err := readArgs(args, paymentIntentFields)
	if err != nil {
		return protocol.PaymentIntentArgs{}, err
	}
	var a protocol.PaymentIntentArgs
	if !f.has("amount") {
		return protocol.PaymentIntentArgs{}, invalid(f.at("amount"), "is required")
	}
	if a.Amount, err = f.amount("amount"); err != nil {
		return protocol.PaymentIntentArgs{}, err
	}
	if a.Currency, err = f.required("currency"); err != nil {
		return protocol.PaymentIntentArgs{}, err
	}
	if !isCurrency(a.Currency) {
		return protocol.PaymentIntentArgs{}, invalid(f.at("currency"), `must be a three-letter ISO currency code in lower case, such as "usd"`)
	}
	if a.Customer, err = f.stripeID("customer", "customer", "cus_"); err != nil {
		return protocol.PaymentIntentArgs{}, err
	}
	if a.PaymentMethod, err = f.stripeID("payment_method", "payment method"); err != nil {
		return protocol.PaymentIntentArgs{}, err
	}
	if a.Confirm, err = f.boolean("confirm"); err != nil {
		return protocol.PaymentIntentArgs{}, err
	}
	if a.Confirm && a.PaymentMethod == "" {
		return protocol.PaymentIntentArgs{}, invalid(f.at("payment_method"), "is required when confirm is true (Stripe cannot confirm a PaymentIntent without a payment method)")
	}
	if a.Description, err = f.str("description"); err != nil {
		return protocol.PaymentIntentArgs{}, err
	}
	if n := chars(a.Description); n > maxDescriptionLen {
		return protocol.PaymentIntentArgs{}, invalid(f.at("description"), fmt.Sprintf("must be at most %d characters long; got %d", maxDescriptionLen, n))
	}
	if a.Metadata, err = f.metadata("metadata"); err != nil {
		return protocol.PaymentIntentArgs{}, err
	}
	return a, nil
}

// isCurrency reports whether s is three lower-case ASCII letters.
func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range []byte(s) {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
