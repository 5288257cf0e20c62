package stripe_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/stripe"
)

// TestRefused tables which Stripe objects record a refusal of their op: the knowledge
// the reconciler and the finance report take from the adapter (VendorObject.Refused).
func TestRefused(t *testing.T) {
	t.Parallel()
	confirm := json.RawMessage(`{"amount":100,"currency":"usd","confirm":true}`)
	plain := json.RawMessage(`{"amount":100,"currency":"usd"}`)
	declined := json.RawMessage(`{"id":"pi_1","last_payment_error":{"code":"card_declined"}}`)
	for _, tc := range []struct {
		status  string
		summary json.RawMessage
		args    json.RawMessage
		want    bool
	}{
		{"succeeded", nil, confirm, false},
		{"failed", nil, plain, true}, // a failed refund
		{"requires_payment_method", declined, nil, true},
		{"requires_payment_method", nil, confirm, true},
		{"requires_payment_method", nil, plain, false}, // made, never confirmed
		{"requires_payment_method", nil, nil, false},
		{"canceled", declined, plain, true},
		{"canceled", json.RawMessage(`{"last_payment_error":null}`), plain, false},
		{"processing", declined, confirm, false},
	} {
		got := stripe.Refused(vendorapi.VendorObject{ID: "x", Status: tc.status, Summary: tc.summary}, tc.args)
		require.Equal(t, tc.want, got, "%s %s %s", tc.status, tc.summary, tc.args)
	}
}
