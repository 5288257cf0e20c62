package fakestripe

import "net/http"

// chargeJSON is the wire form of the charge behind a payment intent. The fake
// keeps no charge objects of its own: it derives them from payment intents.
type chargeJSON struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	AmountCaptured int64             `json:"amount_captured"`
	AmountRefunded int64             `json:"amount_refunded"`
	Captured       bool              `json:"captured"`
	Created        int64             `json:"created"`
	Currency       string            `json:"currency"`
	Customer       *string           `json:"customer"`
	Metadata       map[string]string `json:"metadata"`
	Paid           bool              `json:"paid"`
	PaymentIntent  string            `json:"payment_intent"`
	Refunded       bool              `json:"refunded"`
	Status         string            `json:"status"`
}

// getCharge answers GET /v1/charges/{id} for the latest charge of a payment
// intent.
func (s *Server) getCharge(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	rec, ok := s.pisByCharge[id]
	var res result
	if ok {
		pi := rec.pi
		ch := chargeJSON{
			ID:             id,
			Object:         "charge",
			Amount:         pi.Amount,
			AmountRefunded: pi.AmountRefunded,
			Created:        pi.Created.Unix(),
			Currency:       pi.Currency,
			Customer:       nullable(pi.Customer),
			Metadata:       copyMetadata(pi.Metadata),
			PaymentIntent:  pi.ID,
			Refunded:       pi.AmountRefunded >= pi.Amount,
			Status:         "failed",
		}
		if pi.Status == "succeeded" || pi.Status == "requires_capture" {
			ch.Status, ch.Paid = "succeeded", true
			ch.Captured = pi.Status == "succeeded"
			if ch.Captured {
				ch.AmountCaptured = pi.Amount
			}
		}
		if !ch.Captured {
			ch.Refunded = false
		}
		res = jsonResult(ch)
	} else {
		res = resourceMissing(http.StatusNotFound, "id", "charge", id).result()
	}
	s.mu.Unlock()
	s.writeResult(w, r, res)
}
