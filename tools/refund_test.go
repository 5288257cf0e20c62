package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
)

func TestDecodeRefundValid(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		args string
		want protocol.RefundArgs
	}{
		{"full refund of a payment intent", `{"payment_intent":"pi_3Abc"}`, protocol.RefundArgs{PaymentIntent: "pi_3Abc"}},
		{"partial refund of a charge", `{"charge":"ch_1X","amount":250,"reason":"requested_by_customer"}`,
			protocol.RefundArgs{Charge: "ch_1X", Amount: 250, Reason: "requested_by_customer"}},
		{"py_ charge", `{"charge":"py_1X","reason":"duplicate"}`, protocol.RefundArgs{Charge: "py_1X", Reason: "duplicate"}},
		{"fraudulent with metadata", `{"payment_intent":"pi_1","reason":"fraudulent","metadata":{"ticket":"T-1"}}`,
			protocol.RefundArgs{PaymentIntent: "pi_1", Reason: "fraudulent", Metadata: map[string]string{"ticket": "T-1"}}},
		{"null charge beside payment_intent", `{"payment_intent":"pi_1","charge":null}`, protocol.RefundArgs{PaymentIntent: "pi_1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tools.DecodeRefund(json.RawMessage(tc.args))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestDecodeRefundInvalid(t *testing.T) {
	t.Parallel()

	runInvalid(t, []invalidCase{
		{"neither target", `{"amount":100}`, "args.payment_intent", "exactly one of payment_intent and charge"},
		{"both targets", `{"payment_intent":"pi_1","charge":"ch_1"}`, "args.charge", "exactly one of payment_intent and charge"},
		{"empty payment_intent", `{"payment_intent":""}`, "args.payment_intent", "must not be empty"},
		{"empty charge", `{"charge":""}`, "args.charge", "must not be empty"},
		{"payment_intent not a string", `{"payment_intent":1}`, "args.payment_intent", "must be a string"},
		{"charge id as payment_intent", `{"payment_intent":"ch_1"}`, "args.payment_intent", `PaymentIntent id such as "pi_123"`},
		{"payment intent id as charge", `{"charge":"pi_1"}`, "args.charge", `Charge id such as "ch_123"`},
		{"amount zero", `{"payment_intent":"pi_1","amount":0}`, "args.amount", "must be an integer greater than 0"},
		{"amount negative", `{"payment_intent":"pi_1","amount":-5}`, "args.amount", "must be an integer greater than 0"},
		{"amount fraction", `{"payment_intent":"pi_1","amount":1.5}`, "args.amount", "no fraction"},
		{"amount string", `{"payment_intent":"pi_1","amount":"100"}`, "args.amount", "not a string"},
		{"amount too large", `{"payment_intent":"pi_1","amount":100000000}`, "args.amount", "at most 99999999"},
		{"reason unknown", `{"payment_intent":"pi_1","reason":"changed_mind"}`, "args.reason", "one of duplicate, fraudulent, requested_by_customer"},
		{"reason empty", `{"payment_intent":"pi_1","reason":""}`, "args.reason", "must not be empty"},
		{"metadata 50 keys", `{"payment_intent":"pi_1","metadata":` + metadataJSON(50) + `}`, "args.metadata", "at most 49 keys"},
		{"metadata reserved key", `{"payment_intent":"pi_1","metadata":{"oncebox_op":"x"}}`, "args.metadata.oncebox_op", "reserved"},
		{"metadata bracket key", `{"payment_intent":"pi_1","metadata":{"[x":"y"}}`, "args.metadata.[x", "square brackets"},
		{"unknown field", `{"payment_intent":"pi_1","refund_application_fee":true}`, "args.refund_application_fee", "unknown field; allowed: payment_intent, charge, amount, reason, metadata"},
	}, func(args json.RawMessage) error {
		_, err := tools.DecodeRefund(args)
		return err
	})
}
