package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncebox/oncebox/internal/vendorhttp"
	"github.com/oncebox/oncebox/vendorapi"
)

// answer is everything one request taught Dispatch, the input of classify.
type answer struct {
	// status is the HTTP status, 0 when no response came back.
	status int
	// header is the response's header, nil when none came back.
	header http.Header
	// body is the start of the response body, already free of secrets.
	body []byte
	// err is the transport error when status is 0.
	err error
	// mayHaveArrived is false only when the request provably did not reach
	// the receiver whole: no connection was obtained, or writing it failed.
	mayHaveArrived bool
	// now is when the answer came, for an HTTP-date Retry-After.
	now time.Time
}

// classify turns an answer into a success or a classified failure. maxBytes
// caps the body kept in the result or the error.
func classify(a answer, maxBytes int) (*vendorapi.DispatchResult, *vendorapi.DispatchError) {
	var refused *vendorhttp.EgressError
	if a.status == 0 && errors.As(a.err, &refused) {
		// Refused before any connection: never sent, and never will be.
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "egress_refused", Message: refused.Error(), Err: a.err}
	}
	if a.status == 0 {
		return nil, vendorapi.ClassifyTransport("the webhook target", a.err, a.mayHaveArrived)
	}
	replayed := a.header.Get("Idempotent-Replayed") == "true"
	de := &vendorapi.DispatchError{HTTPStatus: a.status, Replayed: replayed}
	switch {
	case a.status >= 200 && a.status <= 299:
		return &vendorapi.DispatchResult{
			VendorRef: vendorRef(a.status, a.header, a.body),
			Result:    resultJSON(a.status, a.body, maxBytes),
		}, nil
	case a.status == http.StatusConflict:
		de.Outcome, de.Code = vendorapi.OutcomeRetryable, "conflict_in_use"
		de.Message = "the receiver is still handling a request with this idempotency key"
	case a.status == http.StatusTooManyRequests:
		de.Outcome, de.Code = vendorapi.OutcomeRetryable, "rate_limited"
		de.Message = "the receiver is rate limiting requests"
		de.RetryAfter = parseRetryAfter(a.header.Get("Retry-After"), a.now)
	case a.status >= 300 && a.status <= 399:
		de.Outcome, de.Code = vendorapi.OutcomePermanent, "http_3xx"
		de.Message = "the receiver answered with a redirect, which is not followed: fix the target's BaseURL"
		de.Body = resultJSON(a.status, a.body, maxBytes)
	case a.status >= 400 && a.status <= 499:
		de.Outcome, de.Code = vendorapi.OutcomePermanent, "http_4xx"
		de.Message = "the receiver refused the request"
		de.Body = resultJSON(a.status, a.body, maxBytes)
	case a.status >= 500 && a.status <= 599:
		de.Outcome, de.Code = vendorapi.OutcomeUnknown, "http_5xx"
		de.Message = "the receiver failed and may or may not have acted"
		de.Body = resultJSON(a.status, a.body, maxBytes)
	default:
		de.Outcome, de.Code = vendorapi.OutcomeUnknown, "unexpected_status"
		de.Message = "the receiver answered with an unexpected status"
		de.Body = resultJSON(a.status, a.body, maxBytes)
	}
	return nil, de
}

// vendorRef is X-Request-Id, else the JSON body's "id", else the status.
func vendorRef(status int, header http.Header, body []byte) string {
	if id := strings.TrimSpace(header.Get("X-Request-Id")); id != "" {
		return id
	}
	var obj struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &obj) == nil && len(obj.ID) > 0 {
		var s string
		if json.Unmarshal(obj.ID, &s) == nil && s != "" {
			return s
		}
		var n json.Number
		if json.Unmarshal(obj.ID, &n) == nil {
			return n.String()
		}
	}
	return strconv.Itoa(status)
}

// resultJSON is {"status":status,"body":body}, with body as JSON when it is
// JSON and as a string otherwise, cut to maxBytes (then "truncated": true).
func resultJSON(status int, body []byte, maxBytes int) json.RawMessage {
	out := struct {
		Status    int             `json:"status"`
		Body      json.RawMessage `json:"body"`
		Truncated bool            `json:"truncated,omitempty"`
	}{Status: status}
	var compact bytes.Buffer
	switch {
	case len(body) > maxBytes:
		out.Body = jsonString(cutUTF8(body, maxBytes))
		out.Truncated = true
	case len(bytes.TrimSpace(body)) > 0 && json.Compact(&compact, body) == nil:
		out.Body = compact.Bytes()
	default:
		out.Body = jsonString(body)
	}
	b, err := json.Marshal(out)
	if err != nil {
		// Body is valid JSON in every branch above.
		panic("webhook: encode result: " + err.Error())
	}
	return b
}

// jsonString encodes b as a JSON string, replacing invalid UTF-8.
func jsonString(b []byte) json.RawMessage {
	s, err := json.Marshal(strings.ToValidUTF8(string(b), "\uFFFD"))
	if err != nil {
		panic("webhook: encode string: " + err.Error())
	}
	return s
}

// cutUTF8 cuts b to at most n bytes without splitting a rune.
func cutUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	cut := n
	for cut > 0 && cut > n-utf8.UTFMax && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return b[:cut]
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
// It returns 0 when v is empty, malformed or in the past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// redacted is what replaces a secret.
const redacted = "[REDACTED]"

// redact replaces every occurrence of secret in b, in its raw and its JSON
// string forms, and of the credentials after an auth scheme ("Bearer x").
func redact(b []byte, secret string) []byte {
	for _, s := range secretForms(secret) {
		b = bytes.ReplaceAll(b, []byte(s), []byte(redacted))
	}
	return b
}

// readBody reads at most maxBytes+1 bytes of an answer, plus enough more that a
// secret starting within them is read whole (so that redact finds it before the body
// is cut to maxBytes). complete says the whole body was read.
func readBody(r io.Reader, maxBytes int, secret string) (body []byte, complete bool, err error) {
	limit := int64(maxBytes) + 1
	for _, f := range secretForms(secret) {
		limit = max(limit, int64(maxBytes)+1+int64(len(f)))
	}
	body, err = io.ReadAll(io.LimitReader(r, limit))
	return body, err == nil && int64(len(body)) < limit, err
}

// redactBody is redact for an answer body. When the body was not read whole (cut at
// its size limit, or the connection dropped), its end may hold the start of a secret
// that redact cannot recognise: a trailing prefix of any form of the secret is
// replaced too.
func redactBody(body []byte, secret string, complete bool) []byte {
	body = redact(body, secret)
	if complete {
		return body
	}
	for _, f := range secretForms(secret) {
		for n := len(f) - 1; n > 0; n-- {
			if bytes.HasSuffix(body, []byte(f[:n])) {
				return append(body[:len(body)-n:len(body)-n], redacted...)
			}
		}
	}
	return body
}

// redactString is redact for strings.
func redactString(s, secret string) string {
	for _, f := range secretForms(secret) {
		s = strings.ReplaceAll(s, f, redacted)
	}
	return s
}

// secretForms lists the forms of secret worth scrubbing, longest first.
func secretForms(secret string) []string {
	if secret == "" {
		return nil
	}
	forms := []string{secret}
	if enc, err := json.Marshal(secret); err == nil {
		if inner := string(enc[1 : len(enc)-1]); inner != secret {
			forms = append(forms, inner)
		}
	}
	if _, cred, ok := strings.Cut(secret, " "); ok && len(strings.TrimSpace(cred)) >= 4 {
		forms = append(forms, strings.TrimSpace(cred))
	}
	return forms
}

// errorWithoutSecret wraps err so that its text never shows secret.
type errorWithoutSecret struct {
	err    error
	secret string
}

func (e *errorWithoutSecret) Error() string { return redactString(e.err.Error(), e.secret) }
func (e *errorWithoutSecret) Unwrap() error { return e.err }

// scrub removes secret from a DispatchError's text and body.
func scrub(de *vendorapi.DispatchError, secret string) *vendorapi.DispatchError {
	if secret == "" {
		return de
	}
	de.Message = redactString(de.Message, secret)
	if de.Body != nil {
		de.Body = redact(de.Body, secret)
	}
	if de.Err != nil {
		de.Err = &errorWithoutSecret{err: de.Err, secret: secret}
	}
	return de
}
