package fakesendgrid

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/oncebox/oncebox/devkit/eventpost"
)

// Headers of SendGrid's signed Event Webhook.
const (
	SignatureHeader = "X-Twilio-Email-Event-Webhook-Signature"
	TimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
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
	// as vendors retry (SendGrid: 24 hours). Defaults to 1 minute.
	RetryFor time.Duration
	// Client makes the requests. Defaults to a client with a 10 s timeout.
	Client *http.Client
	// Seed seeds the random faults; 0 picks one.
	Seed uint64
}

// EventsConfig makes the fake POST signed Event Webhook requests for every message it
// stores, as SendGrid does: a "processed" event, then the final one.
type EventsConfig struct {
	// Config says where and how the events are delivered.
	Config EventDelivery
	// Key signs the requests (ECDSA P-256, as SendGrid). Required: NewEventKey makes
	// one and its public key in the dashboard's base64 form.
	Key *ecdsa.PrivateKey
	// Final is the event after "processed": "delivered" (the default), "bounce",
	// "dropped" or "deferred"; "" with NoFinal sends only "processed".
	Final string
	// NoFinal sends "processed" only.
	NoFinal bool
}

// NewEventKey returns a new P-256 key and its public key as SendGrid's dashboard shows
// it (base64 of the DER public key): the value of SENDGRID_EVENT_PUBLIC_KEY.
func NewEventKey() (*ecdsa.PrivateKey, string, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return nil, "", err
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, "", err
	}
	return k, base64.StdEncoding.EncodeToString(der), nil
}

// SignEvents signs an Event Webhook payload as SendGrid does: ECDSA over SHA-256 of
// timestamp + payload, ASN.1, base64. It returns the two headers' values.
func SignEvents(key *ecdsa.PrivateKey, payload []byte, at time.Time) (signature, timestamp string, err error) {
	timestamp = strconv.FormatInt(at.Unix(), 10)
	h := sha256.New()
	h.Write([]byte(timestamp))
	h.Write(payload)
	sig, err := ecdsa.SignASN1(crand.Reader, key, h.Sum(nil))
	if err != nil {
		return "", "", err
	}
	return base64.StdEncoding.EncodeToString(sig), timestamp, nil
}

// SetEvents starts posting events for the messages stored from now on (nil stops it;
// events waiting are dropped).
func (s *Server) SetEvents(cfg *EventsConfig) error {
	if cfg == nil {
		s.events.Set(nil, eventpost.Config{})
		s.eachSubuser(func(u *Server) { _ = u.SetEvents(nil) })
		return nil
	}
	if cfg.Key == nil || cfg.Config.URL == "" {
		return fmt.Errorf("fakesendgrid: events need a URL and a key")
	}
	s.events.Set(cfg, eventpost.Config(cfg.Config))
	s.eachSubuser(func(u *Server) { _ = u.SetEvents(cfg) })
	return nil
}

// EventStats returns how many event requests wait, were delivered and were given up.
func (s *Server) EventStats() (pending, delivered, dropped int) {
	return s.events.Stats()
}

// postEventsLocked schedules the events of a stored message; s.mu must be held.
func (s *Server) postEventsLocked(m Message) {
	s.events.Post(func(cfg *EventsConfig) []eventpost.Batch {
		final := cfg.Final
		if final == "" {
			final = "delivered"
		}
		at := m.AcceptedAt
		batches := []eventpost.Batch{s.eventBatch(cfg.Key, m, "processed", at)}
		if !cfg.NoFinal {
			batches = append(batches, s.eventBatch(cfg.Key, m, final, at.Add(time.Second)))
		}
		return batches
	})
}

// eventBatch builds one request carrying event for every recipient of m. Each
// delivery gets new sg_event_ids, as SendGrid's redeliveries do.
func (s *Server) eventBatch(key *ecdsa.PrivateKey, m Message, event string, at time.Time) eventpost.Batch {
	return func(now time.Time) ([]byte, http.Header) {
		evs := make([]map[string]any, 0, len(m.To))
		for i, to := range m.To {
			e := map[string]any{}
			for k, v := range m.CustomArgs {
				e[k] = v
			}
			var id [16]byte
			_, _ = crand.Read(id[:])
			e["email"] = to
			e["timestamp"] = at.Unix()
			e["event"] = event
			e["sg_event_id"] = hex.EncodeToString(id[:])
			e["sg_message_id"] = fmt.Sprintf("%s.filterdrecv-%d", m.XMessageID, i)
			e["smtp-id"] = "<" + m.XMessageID + "@fake.sendgrid>"
			if event == "bounce" {
				e["reason"] = "550 5.1.1 mailbox does not exist"
				e["type"] = "bounce"
			}
			evs = append(evs, e)
		}
		body, _ := json.Marshal(evs)
		sig, ts, _ := SignEvents(key, body, now)
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set(SignatureHeader, sig)
		h.Set(TimestampHeader, ts)
		return body, h
	}
}

// PostEvents posts the events of a stored message (again), as SendGrid's retries do
// once an endpoint that was down answers.
func (s *Server) PostEvents(xMessageID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.events.Config() == nil {
		return fmt.Errorf("fakesendgrid: events are not configured")
	}
	for _, m := range s.messages {
		if m.XMessageID == xMessageID {
			s.postEventsLocked(m)
			return nil
		}
	}
	return fmt.Errorf("fakesendgrid: no message %s", xMessageID)
}
