package notify

import (
	"fmt"

	"github.com/oncebox/oncebox/internal/money"
)

// Payment is the payment a refund gives money back from, as a notification carries it:
// outbox.Payment's fields and JSON, which outbox converts to it when the op starts
// waiting (the two types have the same fields, so a field added to one must be added
// to the other).
type Payment struct {
	// Ref is the vendor's id of the payment the refund names (a PaymentIntent's
	// "pi_..."); empty when the refund names it otherwise (a Stripe charge).
	Ref string `json:"ref,omitempty"`
	// Known reports whether an op of the same tenant made it (its vendor ref is Ref).
	// When false, oncebox knows neither its amount nor its currency: it was made
	// outside oncebox, and the fields below are zero.
	Known bool `json:"known"`
	// Amount and Currency are the payment op's, in minor units.
	Amount   int64  `json:"amount,omitempty"`
	Currency string `json:"currency,omitempty"`
	// Refunded sums the tenant's succeeded refunds of it, in minor units. A refund
	// without an amount refunds what was left, so after one Refunded is Amount.
	Refunded int64 `json:"refunded"`
}

// Describe says in words what a refund of amount (ok false: a refund without an
// amount, of what is left) takes from the payment: "$25.00 USD of a $290.00 USD
// payment, $0.00 USD refunded so far". For a payment oncebox did not make it says so.
func (p *Payment) Describe(amount int64, ok bool) string {
	what := "all that is left"
	if !p.Known {
		if ok {
			what = money.Format(amount, "")
		}
		of := "a payment"
		if p.Ref != "" {
			of = "payment " + p.Ref
		}
		return what + " of " + of + " that oncebox did not make: its amount, currency and earlier refunds are not in oncebox's records"
	}
	left := max(p.Amount-p.Refunded, 0)
	if ok {
		what = money.Format(amount, p.Currency)
	} else {
		what += " (" + money.Format(left, p.Currency) + ")"
	}
	s := fmt.Sprintf("%s of a %s payment, %s refunded so far", what, money.Format(p.Amount, p.Currency), money.Format(p.Refunded, p.Currency))
	if left == 0 {
		s += ": nothing is left to refund"
	}
	return s
}
