package stripe

import (
	"encoding/json"

	"github.com/oncebox/oncebox/vendorapi"
)

// Refused reports whether a Stripe object records a refusal of its op rather than a
// success, for vendorapi.VendorObject.Refused: a refund in status "failed", or a
// PaymentIntent left in requires_payment_method or canceled by a declined confirmation
// (its summary carries a last_payment_error, or the op's args asked to confirm). args
// may be nil when the op is not known (a list of the account's objects).
func Refused(obj vendorapi.VendorObject, args json.RawMessage) bool {
	switch obj.Status {
	case "failed":
		return true
	case "requires_payment_method", "canceled":
		var s struct {
			LastPaymentError json.RawMessage `json:"last_payment_error"`
		}
		if json.Unmarshal(obj.Summary, &s) == nil && len(s.LastPaymentError) > 0 && string(s.LastPaymentError) != "null" {
			return true
		}
		var a struct {
			Confirm bool `json:"confirm"`
		}
		return json.Unmarshal(args, &a) == nil && a.Confirm
	}
	return false
}
