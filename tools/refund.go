package tools

import (
	"encoding/json"

	"github.com/oncebox/oncebox/protocol"
)

var refundFields = []string{"payment_intent", "charge", "amount", "reason", "metadata"}

// DecodeRefund decodes and validates the arguments of stripe.refund. Unknown
// fields are refused. Its errors are *vendorapi.ValidationError.
func DecodeRefund(args json.RawMessage) (protocol.RefundArgs, error) {
	f, err := readArgs(args, refundFields)
	if err != nil {
		return protocol.RefundArgs{}, err
	}
	var a protocol.RefundArgs
	if a.PaymentIntent, err = f.stripeID("payment_intent", "PaymentIntent", "pi_"); err != nil {
		return protocol.RefundArgs{}, err
	}
	if a.Charge, err = f.stripeID("charge", "Charge", "ch_", "py_"); err != nil {
		return protocol.RefundArgs{}, err
	}
	switch {
	case a.PaymentIntent == "" && a.Charge == "":
		return protocol.RefundArgs{}, invalid(f.at("payment_intent"), "is required unless charge is given (exactly one of payment_intent and charge)")
	case a.PaymentIntent != "" && a.Charge != "":
		return protocol.RefundArgs{}, invalid(f.at("charge"), "must not be given together with payment_intent (exactly one of payment_intent and charge)")
	}
	if a.Amount, err = f.amount("amount"); err != nil {
		return protocol.RefundArgs{}, err
	}
	if a.Reason, err = f.nonEmpty("reason"); err != nil {
		return protocol.RefundArgs{}, err
	}
	switch a.Reason {
	case "", "duplicate", "fraudulent", "requested_by_customer":
	default:
		return protocol.RefundArgs{}, invalid(f.at("reason"), "must be one of duplicate, fraudulent, requested_by_customer")
	}
	if a.Metadata, err = f.metadata("metadata"); err != nil {
		return protocol.RefundArgs{}, err
	}
	return a, nil
}
