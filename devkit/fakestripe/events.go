package fakestripe

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/oncebox/oncebox/devkit/eventpost"
)

// EventDelivery says where and how the fake delivers events: the URL, and the
// delays, redeliveries, reordering and retries real deliveries have.
type EventDelivery struct {
	// URL receives every event request as a POST. Required.
	URL string
	// Fallbacks are tried in turn, after URL, when a delivery fails (another process
	// behind the same endpoint). Optional.
	Fallbacks []string
	// Delay is how long after the side effect a delivery starts; Jitter adds a random
	// extra delay up to itself to each request. Both default to 0.
	Delay, Jitter time.Duration
	// DuplicateRate is the chance that a request is delivered a second time (a
	// vendor's redelivery), 0 to 1. Defaults to 0.
	DuplicateRate float64
	// ReorderRate is the chance that an object's requests are delivered last first,
	// 0 to 1. Defaults to 0.
	ReorderRate float64
	// RetryFor is how long a request the receiver did not accept (no 2xx) is retried,
	// as vendors retry (Stripe: 3 days). Defaults to 1 minute.
	RetryFor time.Duration
	// Client makes the requests. Defaults to a client with a 10 s timeout.
	Client *http.Client
	// Seed seeds the random faults; 0 picks one.
	Seed uint64
}

// EventsConfig makes the fake POST signed webhook events, as Stripe does to a webhook
// endpoint: payment_intent.created then payment_intent.succeeded (or
// payment_intent.payment_failed, payment_intent.amount_capturable_updated) for every
// payment intent created, refund.created for every refund, refund.failed for a
// refund failed with FailRefund.
type EventsConfig struct {
	// Config says where and how the events are delivered.
	Config EventDelivery
	// Secret is the endpoint's signing secret (whsec_…). Required.
	Secret string
}

// SignPayload returns the Stripe-Signature header Stripe sends with payload:
// t=<unix time>,v1=<hex HMAC-SHA256(secret, "<t>.<payload>")>.
func SignPayload(secret string, payload []byte, at time.Time) string {
	t := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(t))
	mac.Write([]byte("."))
	mac.Write(payload)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// SetEvents starts posting events for the objects created from now on (nil stops it;
// events waiting are dropped).
func (s *Server) SetEvents(cfg *EventsConfig) error {
	if cfg == nil {
		s.events.Set(nil, eventpost.Config{})
		s.eachAccount(func(a *Server) { _ = a.SetEvents(nil) })
		return nil
	}
	if cfg.Secret == "" || cfg.Config.URL == "" {
		return errors.New("fakestripe: events need a URL and a secret")
	}
	s.events.Set(cfg, eventpost.Config(cfg.Config))
	s.eachAccount(func(a *Server) { _ = a.SetEvents(cfg) })
	return nil
}

// EventStats returns how many event requests wait, were delivered and were given up.
func (s *Server) EventStats() (pending, delivered, dropped int) {
	return s.events.Stats()
}

// FailRefund marks a refund failed after its creation, as a bank may, and posts
// refund.failed.
func (s *Server) FailRefund(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	re, ok := s.refundsByID[id]
	if !ok {
		return fmt.Errorf("fakestripe: no refund %s", id)
	}
	re.re.Status = "failed"
	s.postEventsLocked(event{typ: "refund.failed", object: re.json()})
	return nil
}

type event struct {
	typ    string
	object any
}

// paymentIntentEventsLocked posts the events of a new payment intent; s.mu must be held.
func (s *Server) paymentIntentEventsLocked(rec *paymentIntentRecord, confirm bool) {
	if s.events.Config() == nil {
		return
	}
	final := rec.json()
	if !confirm {
		s.postEventsLocked(event{typ: "payment_intent.created", object: final})
		return
	}
	// The created event shows the intent before its confirmation.
	created := *final
	created.Status = "requires_payment_method"
	created.LastPaymentError = nil
	created.AmountReceived = 0
	created.AmountCapturable = 0
	typ := "payment_intent.succeeded"
	switch {
	case rec.lastError != nil:
		typ = "payment_intent.payment_failed"
	case final.Status == "requires_capture":
		typ = "payment_intent.amount_capturable_updated"
	}
	s.postEventsLocked(event{typ: "payment_intent.created", object: &created}, event{typ: typ, object: final})
}

// postEventsLocked schedules events about one object, in order; s.mu must be held.
func (s *Server) postEventsLocked(evs ...event) {
	s.events.Post(func(cfg *EventsConfig) []eventpost.Batch { return s.eventBatches(cfg.Secret, evs) })
}

// eventBatches builds one request signed with secret for each event; s.mu must be held.
func (s *Server) eventBatches(secret string, evs []event) []eventpost.Batch {
	created := s.now().Unix()
	batches := make([]eventpost.Batch, len(evs))
	for i, ev := range evs {
		e := map[string]any{
			"id": newID("evt_", 24), "object": "event", "api_version": defaultAPIVersion, "created": created,
			"type": ev.typ, "livemode": false, "pending_webhooks": 1,
			"data": map[string]any{"object": ev.object},
		}
		if s.account != "" {
			e["account"] = s.account // A Connect event names its account.
		}
		body, err := json.Marshal(e)
		if err != nil {
			panic("fakestripe: encode event: " + err.Error()) // plain fields only
		}
		// A redelivery carries the same event, freshly signed.
		batches[i] = func(now time.Time) ([]byte, http.Header) {
			h := http.Header{}
			h.Set("Content-Type", "application/json; charset=utf-8")
			h.Set("Stripe-Signature", SignPayload(secret, body, now))
			return body, h
		}
	}
	return batches
}
