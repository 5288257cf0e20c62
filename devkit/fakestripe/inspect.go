package fakestripe

import "time"

// PaymentIntents returns snapshots of every payment intent, in creation order.
func (s *Server) PaymentIntents() []PaymentIntent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PaymentIntent, 0, len(s.pis))
	for _, rec := range s.pis {
		out = append(out, rec.snapshot())
	}
	return out
}

// Refunds returns snapshots of every refund, in creation order.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, 0, len(s.refunds))
	for _, re := range s.refunds {
		out = append(out, re.snapshot())
	}
	return out
}

// CreatedCount returns how many payment intents and refunds exist: every side
// effect ever made, since the fake deletes nothing. It includes payment
// intents left behind by a declined confirmation and objects seeded with
// AddPaymentIntent.
func (s *Server) CreatedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pis) + len(s.refunds)
}

// Requests returns how many POSTs the fake has received, whatever their
// outcome (faults, errors and replays included).
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// ByTag returns the payment intents and refunds whose metadata[key] is value,
// in creation order, regardless of the search lag.
func (s *Server) ByTag(key, value string) (pis []PaymentIntent, refunds []Refund) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rec := range s.pis {
		if v, ok := rec.pi.Metadata[key]; ok && v == value {
			pis = append(pis, rec.snapshot())
		}
	}
	for _, re := range s.refunds {
		if v, ok := re.re.Metadata[key]; ok && v == value {
			refunds = append(refunds, re.snapshot())
		}
	}
	return pis, refunds
}

// AddPaymentIntent stores pi as if it had been created through the API, for
// instance to seed a duplicate before a reconciliation test. Empty fields get
// defaults: ID a new "pi_..." id, Currency "usd", Status "succeeded", Created
// the current time, and LatestCharge a new "ch_..." id for a succeeded
// payment intent.
func (s *Server) AddPaymentIntent(pi PaymentIntent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pi.ID == "" {
		pi.ID = newID("pi_", 24)
	}
	if pi.Currency == "" {
		pi.Currency = "usd"
	}
	if pi.Status == "" {
		pi.Status = "succeeded"
	}
	if pi.Created.IsZero() {
		pi.Created = s.now()
	}
	if pi.LatestCharge == "" && pi.Status == "succeeded" {
		pi.LatestCharge = newID("ch_", 24)
	}
	pi.Metadata = copyMetadata(pi.Metadata)
	s.addPaymentIntentLocked(&paymentIntentRecord{pi: pi, captureMethod: "automatic"})
}

// SetSearchLag changes how old an object must be before search sees it.
func (s *Server) SetSearchLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.searchLag = d
}

// AddRefund stores re as if it had been created through the API, for instance to
// restore a fake's objects across restarts. Empty fields get defaults: ID a new
// "re_..." id, Currency "usd", Status "succeeded" and Created the current time. The
// refunded payment intent's AmountRefunded is left as it is.
func (s *Server) AddRefund(re Refund) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if re.ID == "" {
		re.ID = newID("re_", 24)
	}
	if re.Currency == "" {
		re.Currency = "usd"
	}
	if re.Status == "" {
		re.Status = "succeeded"
	}
	if re.Created.IsZero() {
		re.Created = s.now()
	}
	re.Metadata = copyMetadata(re.Metadata)
	s.addRefundLocked(&refundRecord{re: re})
}
