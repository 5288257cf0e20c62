package fakestripe

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Refund is a snapshot of a refund held by the fake.
type Refund struct {
	// ID is "re_...".
	ID string
	// Amount is in the currency's minor unit.
	Amount int64
	// Currency is the payment intent's currency.
	Currency string
	// Status is always "succeeded".
	Status string
	// PaymentIntent is the refunded payment intent's id.
	PaymentIntent string
	// Charge is the refunded charge's id.
	Charge string
	// Reason is "duplicate", "fraudulent", "requested_by_customer" or "".
	Reason string
	// Metadata is the key-value metadata; never nil in snapshots.
	Metadata map[string]string
	// Created is when the refund was created, per Config.Now.
	Created time.Time
}

// refundRecord is the fake's state for one refund.
type refundRecord struct {
	re  Refund
	seq int64
}

func (r *refundRecord) key() sortKey { return sortKey{created: r.re.Created, seq: r.seq} }

func (r *refundRecord) snapshot() Refund {
	re := r.re
	re.Metadata = copyMetadata(r.re.Metadata)
	return re
}

// refundJSON is the wire form of a refund.
type refundJSON struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Charge        *string           `json:"charge"`
	Created       int64             `json:"created"`
	Currency      string            `json:"currency"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent *string           `json:"payment_intent"`
	Reason        *string           `json:"reason"`
	Status        string            `json:"status"`
}

func (r *refundRecord) json() *refundJSON {
	return &refundJSON{
		ID:            r.re.ID,
		Object:        "refund",
		Amount:        r.re.Amount,
		Charge:        nullable(r.re.Charge),
		Created:       r.re.Created.Unix(),
		Currency:      r.re.Currency,
		Metadata:      copyMetadata(r.re.Metadata),
		PaymentIntent: nullable(r.re.PaymentIntent),
		Reason:        nullable(r.re.Reason),
		Status:        r.re.Status,
	}
}

// isRefundParam reports whether name is a create parameter the fake accepts.
func isRefundParam(name string) bool {
	switch name {
	case "payment_intent", "charge", "amount", "reason", "metadata", "expand",
		"instructions_email", "origin", "refund_application_fee", "reverse_transfer":
		return true
	}
	return false
}

// validateRefund checks the parameters of POST /v1/refunds. Whether the
// payment intent exists and has enough left to refund is decided when the
// endpoint runs, so those refusals are stored under the idempotency key.
func (s *Server) validateRefund(form url.Values) (func() result, *apiError) {
	if err := checkKnownParams(form, isRefundParam); err != nil {
		return nil, err
	}
	piID, _ := formString(form, "payment_intent")
	chargeID, _ := formString(form, "charge")
	if piID == "" && chargeID == "" {
		return nil, invalidParam("payment_intent", "parameter_missing", "One of the following params should be provided for this request: payment_intent or charge.")
	}
	amount, hasAmount, err := formAmount(form, "amount", false)
	if err != nil {
		return nil, err
	}
	reason, _ := formString(form, "reason")
	switch reason {
	case "", "duplicate", "fraudulent", "requested_by_customer":
	default:
		return nil, invalidParam("reason", "", "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer")
	}
	metadata, err := formMetadata(form)
	if err != nil {
		return nil, err
	}

	return func() result {
		rec, refusal := s.refundTargetLocked(piID, chargeID)
		if refusal != nil {
			return refusal.result()
		}
		remaining := rec.pi.Amount - rec.pi.AmountRefunded
		if remaining <= 0 {
			return (&apiError{
				status:  http.StatusBadRequest,
				Type:    typeInvalidRequest,
				Code:    "charge_already_refunded",
				Charge:  rec.pi.LatestCharge,
				Message: "Charge " + rec.pi.LatestCharge + " has already been refunded.",
			}).result()
		}
		if !hasAmount {
			amount = remaining
		}
		if amount > remaining {
			return invalidParam("amount", "",
				"Refund amount ("+displayAmount(amount, rec.pi.Currency)+") is greater than unrefunded amount on charge ("+
					displayAmount(remaining, rec.pi.Currency)+")").result()
		}
		rec.pi.AmountRefunded += amount
		re := &refundRecord{re: Refund{
			ID:            newID("re_", 24),
			Amount:        amount,
			Currency:      rec.pi.Currency,
			Status:        "succeeded",
			PaymentIntent: rec.pi.ID,
			Charge:        rec.pi.LatestCharge,
			Reason:        reason,
			Metadata:      metadata,
			Created:       s.now(),
		}}
		s.addRefundLocked(re)
		s.postEventsLocked(event{typ: "refund.created", object: re.json()})
		return jsonResult(re.json())
	}, nil
}

// refundTargetLocked finds the payment intent a refund names and checks that
// it has a successful charge; s.mu must be held.
func (s *Server) refundTargetLocked(piID, chargeID string) (*paymentIntentRecord, *apiError) {
	var rec *paymentIntentRecord
	if piID != "" {
		var ok bool
		if rec, ok = s.pisByID[piID]; !ok {
			return nil, resourceMissing(http.StatusBadRequest, "payment_intent", "payment_intent", piID)
		}
	}
	if chargeID != "" {
		byCharge, ok := s.pisByCharge[chargeID]
		if !ok {
			return nil, resourceMissing(http.StatusBadRequest, "charge", "charge", chargeID)
		}
		if rec != nil && rec != byCharge {
			return nil, invalidParam("charge", "", "The charge "+chargeID+" does not belong to the payment intent "+piID+".")
		}
		rec = byCharge
	}
	if rec.pi.Status != "succeeded" {
		return nil, &apiError{
			status:  http.StatusBadRequest,
			Type:    typeInvalidRequest,
			Code:    "charge_not_refundable",
			Message: "This PaymentIntent (" + rec.pi.ID + ") does not have a successful charge to refund.",
		}
	}
	return rec, nil
}

// addRefundLocked stores a new refund; s.mu must be held.
func (s *Server) addRefundLocked(re *refundRecord) {
	re.seq = s.nextSeq()
	s.refunds = append(s.refunds, re)
	s.refundsByID[re.re.ID] = re
}

// getRefund answers GET /v1/refunds/{id}.
func (s *Server) getRefund(w http.ResponseWriter, r *http.Request) {
	getObject(s, w, r, s.refundsByID, (*refundRecord).json, "id", "refund")
}

// listRefunds answers GET /v1/refunds.
func (s *Server) listRefunds(w http.ResponseWriter, r *http.Request) {
	s.writeResult(w, r, s.listRefundsResult(r.URL.Query()))
}

func (s *Server) listRefundsResult(q url.Values) result {
	piID, _ := formString(q, "payment_intent")
	chargeID, _ := formString(q, "charge")
	s.mu.Lock()
	defer s.mu.Unlock()
	return list(q, s.refunds, s.refundsByID, (*refundRecord).key, (*refundRecord).json, "refund", "/v1/refunds",
		func(re *refundRecord) bool {
			return (piID == "" || re.re.PaymentIntent == piID) && (chargeID == "" || re.re.Charge == chargeID)
		})
}

// displayAmount writes an amount in minor units as Stripe's error messages do: "$12.00",
// "€5.50", "¥1200", "12.00 CHF".
func displayAmount(amount int64, currency string) string {
	code := strings.ToUpper(currency)
	var num string
	switch code {
	case "BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV", "XAF", "XOF", "XPF":
		num = strconv.FormatInt(amount, 10)
	default:
		sign := ""
		if amount < 0 {
			sign, amount = "-", -amount
		}
		num = fmt.Sprintf("%s%d.%02d", sign, amount/100, amount%100)
	}
	if sym, ok := map[string]string{"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}[code]; ok {
		return sym + num
	}
	return num + " " + code
}
