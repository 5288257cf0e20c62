package stripe

import (
	"encoding/json"
	"time"

	stripego "github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/vendorapi"
)

// PaymentIntentSummary is the result stored for a stripe.payment_intent op and
// the Summary of a payment intent found by Lookup or ListObjects. It holds no
// secret: never the client_secret.
type PaymentIntentSummary struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	AmountReceived int64             `json:"amount_received"`
	Currency       string            `json:"currency"`
	Status         string            `json:"status"`
	LatestCharge   *string           `json:"latest_charge"`
	Customer       *string           `json:"customer"`
	Created        int64             `json:"created"`
	Metadata       map[string]string `json:"metadata,omitempty"`
}

// RefundSummary is the result stored for a stripe.refund op and the Summary of
// a refund found by Lookup or ListObjects.
type RefundSummary struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	Status        string            `json:"status"`
	PaymentIntent *string           `json:"payment_intent"`
	Charge        *string           `json:"charge"`
	Reason        *string           `json:"reason"`
	Created       int64             `json:"created"`
	Metadata      map[string]string `json:"metadata,omitempty"`
}

func paymentIntentSummary(pi *stripego.PaymentIntent) PaymentIntentSummary {
	s := PaymentIntentSummary{
		ID:             pi.ID,
		Object:         "payment_intent",
		Amount:         pi.Amount,
		AmountReceived: pi.AmountReceived,
		Currency:       string(pi.Currency),
		Status:         string(pi.Status),
		Created:        pi.Created,
		Metadata:       pi.Metadata,
	}
	if pi.LatestCharge != nil && pi.LatestCharge.ID != "" {
		s.LatestCharge = &pi.LatestCharge.ID
	}
	if pi.Customer != nil && pi.Customer.ID != "" {
		s.Customer = &pi.Customer.ID
	}
	return s
}

func refundSummary(re *stripego.Refund) RefundSummary {
	s := RefundSummary{
		ID:       re.ID,
		Object:   "refund",
		Amount:   re.Amount,
		Currency: string(re.Currency),
		Status:   string(re.Status),
		Created:  re.Created,
		Metadata: re.Metadata,
	}
	if re.PaymentIntent != nil && re.PaymentIntent.ID != "" {
		s.PaymentIntent = &re.PaymentIntent.ID
	}
	if re.Charge != nil && re.Charge.ID != "" {
		s.Charge = &re.Charge.ID
	}
	if re.Reason != "" {
		r := string(re.Reason)
		s.Reason = &r
	}
	return s
}

// paymentIntentObject is pi as the reconciler and the report see it; a PaymentIntent
// whose confirmation was declined records the refusal (last_payment_error).
func paymentIntentObject(pi *stripego.PaymentIntent) vendorapi.VendorObject {
	o := vendorapi.VendorObject{
		ID:       pi.ID,
		OpID:     pi.Metadata[vendorapi.TagKey],
		Amount:   pi.Amount,
		Currency: string(pi.Currency),
		Status:   string(pi.Status),
		Created:  unixTime(pi.Created),
		Summary:  mustJSON(paymentIntentSummary(pi)),
	}
	o.Refused = Refused(o, nil) ||
		(pi.LastPaymentError != nil && (o.Status == "requires_payment_method" || o.Status == "canceled"))
	return o
}

func refundObject(re *stripego.Refund) vendorapi.VendorObject {
	o := vendorapi.VendorObject{
		ID:       re.ID,
		OpID:     re.Metadata[vendorapi.TagKey],
		Amount:   re.Amount,
		Currency: string(re.Currency),
		Status:   string(re.Status),
		Created:  unixTime(re.Created),
		Summary:  mustJSON(refundSummary(re)),
	}
	o.Refused = Refused(o, nil)
	return o
}

// mustJSON encodes a summary, which is made of plain fields only.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("stripe: encode summary: " + err.Error())
	}
	return b
}

// unixTime is Stripe's created field as a time; an object that carries none (0) has
// the zero time, not 1970.
func unixTime(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}
