package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// redactedText replaces a piece of personal data: its SHA-256 and its size.
type redactedText struct {
	Redacted string `json:"redacted"`
	Bytes    int    `json:"bytes"`
}

// redactedAddress is an Address with the email hashed and the name dropped.
type redactedAddress struct {
	Email string `json:"email"`
}

// redactedMailArgs is the stored form of MailArgs once an op is settled.
type redactedMailArgs struct {
	From                redactedAddress   `json:"from"`
	To                  []redactedAddress `json:"to"`
	Subject             *redactedText     `json:"subject,omitempty"`
	Text                *redactedText     `json:"text,omitempty"`
	HTML                *redactedText     `json:"html,omitempty"`
	TemplateID          string            `json:"template_id,omitempty"`
	DynamicTemplateData *redactedText     `json:"dynamic_template_data,omitempty"`
	Categories          []string          `json:"categories,omitempty"`
}

// redactMail is sendgrid.mail's Redact: addresses become "sha256:<hex>" of the
// lower-cased address, names are dropped, and subject, text, html and
// dynamic_template_data become redactedText markers. template_id and categories
// stay. Arguments that do not decode are replaced by one marker as a whole.
func redactMail(args json.RawMessage) json.RawMessage {
	a, err := DecodeMail(args)
	if err != nil {
		return mustMarshal(redactBytes(args))
	}
	r := redactedMailArgs{
		From:       redactAddress(a.From),
		To:         make([]redactedAddress, len(a.To)),
		Subject:    redactString(a.Subject),
		Text:       redactString(a.Text),
		HTML:       redactString(a.HTML),
		TemplateID: a.TemplateID,
		Categories: a.Categories,
	}
	for i, to := range a.To {
		r.To[i] = redactAddress(to)
	}
	if a.DynamicTemplateData != nil {
		data, err := json.Marshal(a.DynamicTemplateData) // keys sorted, numbers as written
		if err != nil {
			data = nil // Unreachable: DecodeMail built it from JSON.
		}
		r.DynamicTemplateData = redactBytes(data)
	}
	return mustMarshal(r)
}

// redactAddress hashes an address's email and drops its name.
func redactAddress(a Address) redactedAddress {
	return redactedAddress{Email: hashString(strings.ToLower(a.Email))}
}

// redactString returns the marker for s, nil for "".
func redactString(s string) *redactedText {
	if s == "" {
		return nil
	}
	return redactBytes([]byte(s))
}

// redactBytes returns the marker for b.
func redactBytes(b []byte) *redactedText {
	return &redactedText{Redacted: hashBytes(b), Bytes: len(b)}
}

// hashString returns "sha256:<hex>" of s.
func hashString(s string) string { return hashBytes([]byte(s)) }

// hashBytes returns "sha256:<hex>" of b.
func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// mustMarshal marshals v, which holds only strings, numbers and slices of them and
// so always marshals; should it ever fail, nothing of the arguments is kept.
func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{"redacted":"all"}`)
	}
	return b
}
