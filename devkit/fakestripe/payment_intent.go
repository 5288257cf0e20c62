package fakestripe

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// PaymentIntent is a snapshot of a payment intent held by the fake.
type PaymentIntent struct {
	// ID is "pi_...".
	ID string
	// Amount is in the currency's minor unit.
	Amount int64
	// Currency is a lower-case ISO code such as "usd".
	Currency string
	// Status is Stripe's status: "succeeded", "requires_payment_method",
	// "requires_confirmation" or "requires_capture".
	Status string
	// Customer is the customer id, or "".
	Customer string
	// PaymentMethod is the payment method id, or "".
	PaymentMethod string
	// Description is the free-text description, or "".
	Description string
	// LatestCharge is the id of the last charge attempt ("ch_..."), or "".
	LatestCharge string
	// AmountRefunded is the sum of the refunds made against the payment
	// intent (Stripe shows it on the charge).
	AmountRefunded int64
	// Metadata is the key-value metadata; never nil in snapshots.
	Metadata map[string]string
	// Created is when the payment intent was created, per Config.Now.
	Created time.Time
}

// paymentIntentRecord is the fake's state for one payment intent.
type paymentIntentRecord struct {
	pi  PaymentIntent
	seq int64
	// lastError is the last_payment_error of a declined confirmation.
	lastError *apiError
	// captureMethod is "automatic" or "manual".
	captureMethod string
}

func (p *paymentIntentRecord) key() sortKey { return sortKey{created: p.pi.Created, seq: p.seq} }

// snapshot returns a copy that shares nothing with the fake's state.
func (p *paymentIntentRecord) snapshot() PaymentIntent {
	pi := p.pi
	pi.Metadata = copyMetadata(p.pi.Metadata)
	return pi
}

// paymentIntentJSON is the wire form of a payment intent.
type paymentIntentJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CaptureMethod      string            `json:"capture_method"`
	ClientSecret       string            `json:"client_secret"`
	ConfirmationMethod string            `json:"confirmation_method"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Customer           *string           `json:"customer"`
	Description        *string           `json:"description"`
	LastPaymentError   *apiError         `json:"last_payment_error"`
	LatestCharge       *string           `json:"latest_charge"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	PaymentMethod      *string           `json:"payment_method"`
	PaymentMethodTypes []string          `json:"payment_method_types"`
	Status             string            `json:"status"`
}

func (p *paymentIntentRecord) json() *paymentIntentJSON {
	j := &paymentIntentJSON{
		ID:                 p.pi.ID,
		Object:             "payment_intent",
		Amount:             p.pi.Amount,
		CaptureMethod:      p.captureMethod,
		ClientSecret:       p.pi.ID + "_secret_fake",
		ConfirmationMethod: "automatic",
		Created:            p.pi.Created.Unix(),
		Currency:           p.pi.Currency,
		Customer:           nullable(p.pi.Customer),
		Description:        nullable(p.pi.Description),
		LastPaymentError:   p.lastError,
		LatestCharge:       nullable(p.pi.LatestCharge),
		Metadata:           copyMetadata(p.pi.Metadata),
		PaymentMethod:      nullable(p.pi.PaymentMethod),
		PaymentMethodTypes: []string{"card"},
		Status:             p.pi.Status,
	}
	switch p.pi.Status {
	case "succeeded":
		j.AmountReceived = p.pi.Amount
	case "requires_capture":
		j.AmountCapturable = p.pi.Amount
	}
	return j
}

// declineCode returns the decline_code of Stripe's test payment methods that
// decline, or "" for one that succeeds.
func declineCode(paymentMethod string) string {
	switch paymentMethod {
	case "pm_card_chargeDeclined", "pm_card_visa_chargeDeclined":
		return "generic_decline"
	case "pm_card_chargeDeclinedInsufficientFunds", "pm_card_visa_chargeDeclinedInsufficientFunds":
		return "insufficient_funds"
	}
	return ""
}

// isPaymentIntentParam reports whether name is a create parameter the fake
// accepts; the ones it does not model are accepted and ignored.
func isPaymentIntentParam(name string) bool {
	switch name {
	case "amount", "currency", "customer", "payment_method", "confirm", "capture_method",
		"description", "metadata", "expand",
		"automatic_payment_methods", "confirmation_method", "error_on_requires_action",
		"mandate_data", "off_session", "on_behalf_of", "application_fee_amount",
		"payment_method_options", "payment_method_types", "receipt_email", "return_url",
		"setup_future_usage", "shipping", "statement_descriptor",
		"statement_descriptor_suffix", "transfer_data", "transfer_group", "use_stripe_sdk":
		return true
	}
	return false
}

// validatePaymentIntent checks the parameters of POST /v1/payment_intents.
func (s *Server) validatePaymentIntent(form url.Values) (func() result, *apiError) {
	if err := checkKnownParams(form, isPaymentIntentParam); err != nil {
		return nil, err
	}
	amount, _, err := formAmount(form, "amount", true)
	if err != nil {
		return nil, err
	}
	currency, err := formCurrency(form)
	if err != nil {
		return nil, err
	}
	confirm, err := formBool(form, "confirm")
	if err != nil {
		return nil, err
	}
	metadata, err := formMetadata(form)
	if err != nil {
		return nil, err
	}
	captureMethod, _ := formString(form, "capture_method")
	switch captureMethod {
	case "":
		captureMethod = "automatic"
	case "automatic", "automatic_async", "manual":
	default:
		return nil, invalidParam("capture_method", "", "Invalid capture_method: must be one of automatic, automatic_async, or manual")
	}
	customer, _ := formString(form, "customer")
	paymentMethod, _ := formString(form, "payment_method")
	description, _ := formString(form, "description")
	if confirm && paymentMethod == "" {
		return nil, invalidParam("payment_method", "payment_intent_unexpected_state",
			"You cannot confirm this PaymentIntent because it's missing a payment method. To confirm the PaymentIntent with a payment method, pass payment_method.")
	}

	return func() result {
		rec := &paymentIntentRecord{
			pi: PaymentIntent{
				ID:            newID("pi_", 24),
				Amount:        amount,
				Currency:      currency,
				Status:        "requires_payment_method",
				Customer:      customer,
				PaymentMethod: paymentMethod,
				Description:   description,
				Metadata:      metadata,
				Created:       s.now(),
			},
			captureMethod: captureMethod,
		}
		var decline *apiError
		switch {
		case confirm:
			rec.pi.LatestCharge = newID("ch_", 24)
			if code := declineCode(paymentMethod); code != "" {
				decline = &apiError{
					status:      http.StatusPaymentRequired,
					Type:        typeCard,
					Code:        "card_declined",
					DeclineCode: code,
					Message:     "Your card was declined.",
					Charge:      rec.pi.LatestCharge,
					DocURL:      "https://stripe.com/docs/error-codes/card-declined",
				}
				rec.lastError = decline
				rec.pi.PaymentMethod = ""
			} else if captureMethod == "manual" {
				rec.pi.Status = "requires_capture"
			} else {
				rec.pi.Status = "succeeded"
			}
		case paymentMethod != "":
			rec.pi.Status = "requires_confirmation"
		}
		s.addPaymentIntentLocked(rec)
		s.paymentIntentEventsLocked(rec, confirm)
		if decline != nil {
			// The error carries the payment intent as it now stands.
			withIntent := *decline
			withIntent.PaymentIntent = rec.json()
			return withIntent.result()
		}
		return jsonResult(rec.json())
	}, nil
}

// addPaymentIntentLocked stores a new payment intent; s.mu must be held.
func (s *Server) addPaymentIntentLocked(rec *paymentIntentRecord) {
	rec.seq = s.nextSeq()
	s.pis = append(s.pis, rec)
	s.pisByID[rec.pi.ID] = rec
	if rec.pi.LatestCharge != "" {
		s.pisByCharge[rec.pi.LatestCharge] = rec
	}
}

// getPaymentIntent answers GET /v1/payment_intents/{id}.
func (s *Server) getPaymentIntent(w http.ResponseWriter, r *http.Request) {
	getObject(s, w, r, s.pisByID, (*paymentIntentRecord).json, "intent", "payment_intent")
}

// listPaymentIntents answers GET /v1/payment_intents.
func (s *Server) listPaymentIntents(w http.ResponseWriter, r *http.Request) {
	s.writeResult(w, r, s.listPaymentIntentsResult(r.URL.Query()))
}

func (s *Server) listPaymentIntentsResult(q url.Values) result {
	customer, _ := formString(q, "customer")
	s.mu.Lock()
	defer s.mu.Unlock()
	return list(q, s.pis, s.pisByID, (*paymentIntentRecord).key, (*paymentIntentRecord).json, "payment_intent", "/v1/payment_intents",
		func(rec *paymentIntentRecord) bool { return customer == "" || rec.pi.Customer == customer })
}

// searchPaymentIntents answers GET /v1/payment_intents/search.
func (s *Server) searchPaymentIntents(w http.ResponseWriter, r *http.Request) {
	s.writeResult(w, r, s.searchPaymentIntentsResult(r.URL.Query()))
}

func (s *Server) searchPaymentIntentsResult(q url.Values) result {
	raw, ok := formString(q, "query")
	if !ok || strings.TrimSpace(raw) == "" {
		return invalidParam("query", "parameter_missing", "Missing required param: query.").result()
	}
	query, err := parseSearchQuery(raw)
	if err != nil {
		return err.result()
	}
	limit, err := parseLimit(q)
	if err != nil {
		return err.result()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	var after *sortKey
	if cursor, ok := formString(q, "page"); ok && cursor != "" {
		rec, found := s.pisByID[strings.TrimPrefix(cursor, "page_")]
		if !found {
			return invalidParam("page", "", "Invalid page: "+cursor).result()
		}
		k := rec.key()
		after = &k
	}
	now := s.now()
	var items []*paymentIntentRecord
	for _, rec := range s.pis {
		if now.Sub(rec.pi.Created) >= s.searchLag && query.match(rec) {
			items = append(items, rec)
		}
	}
	page, hasMore := paginate(items, (*paymentIntentRecord).key, limit, after, nil)
	out := searchJSON[*paymentIntentJSON]{Object: "search_result", Data: []*paymentIntentJSON{}, HasMore: hasMore, URL: "/v1/payment_intents/search"}
	for _, rec := range page {
		out.Data = append(out.Data, rec.json())
	}
	if hasMore {
		out.NextPage = nullable("page_" + page[len(page)-1].pi.ID)
	}
	return jsonResult(out)
}
