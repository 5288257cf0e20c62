package tools

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/oncebox/oncebox/protocol"
)

// redactedText replaces a piece of personal data: its hash and its size.
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

// mailRedactor is sendgrid.mail's Redact, keyed or not.
type mailRedactor struct {
	// key, when set, makes every hash an HMAC-SHA256 under it, so that an address
	// cannot be recovered by hashing guesses without the key.
	key []byte
}

// redact replaces addresses with the hash of the lower-cased address, drops names,
// and replaces subject, text, html and dynamic_template_data with redactedText
// markers. template_id and categories stay. Arguments already in redacted form are
// returned as they are; others that do not decode are replaced by one marker as a
// whole.
func (m mailRedactor) redact(args json.RawMessage) json.RawMessage {
	a, err := DecodeMail(args)
	if err != nil {
		if isRedactedMail(args) {
			return args
		}
		return mustMarshal(m.redactBytes(args))
	}
	r := redactedMailArgs{
		From:       m.redactAddress(a.From),
		To:         make([]redactedAddress, len(a.To)),
		Subject:    m.redactString(a.Subject),
		Text:       m.redactString(a.Text),
		HTML:       m.redactString(a.HTML),
		TemplateID: a.TemplateID,
		Categories: a.Categories,
	}
	for i, to := range a.To {
		r.To[i] = m.redactAddress(to)
	}
	if a.DynamicTemplateData != nil {
		data, err := json.Marshal(a.DynamicTemplateData) // keys sorted, numbers as written
		if err != nil {
			data = nil // Unreachable: DecodeMail built it from JSON.
		}
		r.DynamicTemplateData = m.redactBytes(data)
	}
	return mustMarshal(r)
}

// isRedactedMail reports whether args are already the output of a redaction: a
// whole marker, or a redactedMailArgs whose addresses are all hashes.
func isRedactedMail(args json.RawMessage) bool {
	var whole redactedText
	if strictDecode(args, &whole) && isHash(whole.Redacted) {
		return true
	}
	var r redactedMailArgs
	if !strictDecode(args, &r) || len(r.To) == 0 {
		return false
	}
	for _, a := range append([]redactedAddress{r.From}, r.To...) {
		if !isHash(a.Email) {
			return false
		}
	}
	return true
}

// strictDecode decodes args into v, refusing unknown fields.
func strictDecode(args json.RawMessage, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil
}

func isHash(s string) bool {
	return strings.HasPrefix(s, "sha256:") || strings.HasPrefix(s, "hmac-sha256:")
}

// redactAddress hashes an address's email and drops its name.
func (m mailRedactor) redactAddress(a protocol.Address) redactedAddress {
	return redactedAddress{Email: m.hash([]byte(strings.ToLower(a.Email)))}
}

// redactString returns the marker for s, nil for "".
func (m mailRedactor) redactString(s string) *redactedText {
	if s == "" {
		return nil
	}
	return m.redactBytes([]byte(s))
}

// redactBytes returns the marker for b.
func (m mailRedactor) redactBytes(b []byte) *redactedText {
	return &redactedText{Redacted: m.hash(b), Bytes: len(b)}
}

// hash returns "hmac-sha256:<hex>" of b under the key, or "sha256:<hex>" without one.
func (m mailRedactor) hash(b []byte) string {
	if len(m.key) > 0 {
		mac := hmac.New(sha256.New, m.key)
		mac.Write(b)
		return "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil))
	}
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
