package fakesendgrid

import (
	"crypto/rand"
	"encoding/base64"
	"maps"
	"slices"
	"time"
)

// Message is one email the fake accepted (or was seeded with).
type Message struct {
	// XMessageID is the X-Message-Id header answered for the POST. Activity
	// rows for recipient n carry msg_id "<XMessageID>.filterdrecv-<n>".
	XMessageID string
	// From is from.email.
	From string
	// To holds every personalizations[].to[].email, in order.
	To []string
	// Subject is the first personalization's subject, else the message's.
	Subject string
	// Categories are the message's categories.
	Categories []string
	// TemplateID is template_id, empty when content was sent instead.
	TemplateID string
	// CustomArgs are the message-level custom_args merged with the first
	// personalization's; the personalization wins on a shared key.
	CustomArgs map[string]string
	// Headers are the HTTP request headers seen (first value of each, without
	// Authorization), so a test can prove an Idempotency-Key was ignored.
	Headers map[string]string
	// AcceptedAt is when the fake stored the message.
	AcceptedAt time.Time
}

func (m Message) clone() Message {
	m.To = slices.Clone(m.To)
	m.Categories = slices.Clone(m.Categories)
	m.CustomArgs = maps.Clone(m.CustomArgs)
	m.Headers = maps.Clone(m.Headers)
	return m
}

// newMessageID returns a random 22-character base64url id shaped like
// SendGrid's X-Message-Id.
func newMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails.
	return base64.RawURLEncoding.EncodeToString(b[:])
}
