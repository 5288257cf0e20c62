package sendgrid

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oncebox/oncebox/vendorapi"
)

const (
	// minRetryAfter is the shortest wait asked for after a 429.
	minRetryAfter = time.Second
	// maxRetryAfter caps a wait read from X-RateLimit-Reset, against a clock gone wrong.
	maxRetryAfter = time.Hour
)

// sendAnswer is everything one POST /v3/mail/send taught Dispatch: the input of
// classifySend.
type sendAnswer struct {
	// status is the HTTP status, 0 when no response came back.
	status int
	// header is the response's header, nil when none came back.
	header http.Header
	// body is the response body (SendGrid's {"errors":[...]} on a refusal).
	body []byte
	// err is the transport error when status is 0.
	err error
	// wrote is true once the whole request was written to the connection: from
	// then on SendGrid may have accepted it whatever happens to the answer.
	wrote bool
	// now is when the answer came, for X-RateLimit-Reset.
	now time.Time
}

// classifySend turns one answer of POST /v3/mail/send into a success or a
// classified failure. Non-2xx statuses are answers, not transport errors:
// 400/401/403/413 are refusals, 429 is a refusal to try again, 5xx and anything
// unexpected may hide a queued email.
func classifySend(a sendAnswer) (*vendorapi.DispatchResult, *vendorapi.DispatchError) {
	if a.status == 0 {
		return nil, vendorapi.ClassifyTransport("SendGrid", a.err, a.wrote)
	}
	de := &vendorapi.DispatchError{HTTPStatus: a.status}
	switch {
	case a.status >= 200 && a.status <= 299:
		id := strings.TrimSpace(a.header.Get("X-Message-Id"))
		return &vendorapi.DispatchResult{VendorRef: id, Result: resultJSON(id, a.status)}, nil
	case a.status == http.StatusBadRequest:
		de.Outcome, de.Code, de.Message = vendorapi.OutcomePermanent, "bad_request", "SendGrid refused the email as invalid"
		de.Body = errorBody(a.body)
	case a.status == http.StatusUnauthorized:
		de.Outcome, de.Code, de.Message = vendorapi.OutcomePermanent, "unauthorized", "SendGrid refused the API key"
		de.Body = errorBody(a.body)
	case a.status == http.StatusForbidden:
		de.Outcome, de.Code, de.Message = vendorapi.OutcomePermanent, "forbidden",
			"SendGrid refused the email (API key scope, or a sender identity that is not verified)"
		de.Body = errorBody(a.body)
	case a.status == http.StatusRequestEntityTooLarge:
		de.Outcome, de.Code, de.Message = vendorapi.OutcomePermanent, "payload_too_large", "the email is over SendGrid's 30 MB limit"
		de.Body = errorBody(a.body)
	case a.status == http.StatusTooManyRequests:
		de.Outcome, de.Code, de.Message = vendorapi.OutcomeRetryable, "rate_limited", "SendGrid is rate limiting sends; nothing was sent"
		de.RetryAfter = retryAfter(a.header, a.now)
	case a.status >= 500 && a.status <= 599:
		de.Outcome, de.Code, de.Message = vendorapi.OutcomeUnknown, "server_error",
			"SendGrid failed and may or may not have queued the email"
		de.Body = errorBody(a.body)
	default:
		de.Outcome, de.Code, de.Message = vendorapi.OutcomeUnknown, "unexpected_status",
			"SendGrid answered with an unexpected status; the email may or may not have been queued"
		de.Body = errorBody(a.body)
	}
	return nil, de
}

// retryAfter reads X-RateLimit-Reset (unix seconds) as a wait from now: at
// least minRetryAfter, at most maxRetryAfter, minRetryAfter when absent or
// malformed.
func retryAfter(header http.Header, now time.Time) time.Duration {
	secs, err := strconv.ParseInt(strings.TrimSpace(header.Get("X-RateLimit-Reset")), 10, 64)
	if err != nil {
		return minRetryAfter
	}
	return min(max(time.Unix(secs, 0).Sub(now), minRetryAfter), maxRetryAfter)
}

// resultJSON is the stored result of a send: {"message_id": ..., "status": ...}.
func resultJSON(messageID string, status int) json.RawMessage {
	b, err := json.Marshal(struct {
		MessageID string `json:"message_id"`
		Status    int    `json:"status"`
	}{messageID, status})
	if err != nil {
		panic("sendgrid: encode result: " + err.Error()) // A string and an int always encode.
	}
	return b
}

// maxErrorBody caps the error body kept for an op.
const maxErrorBody = 16 << 10

// errorBody is SendGrid's error body as compact JSON, or as a JSON string when
// it is not JSON, or nil when it is empty. A body over maxErrorBody is cut and
// kept as a string.
func errorBody(body []byte) json.RawMessage {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil
	}
	if len(body) <= maxErrorBody {
		var compact bytes.Buffer
		if json.Compact(&compact, body) == nil {
			return compact.Bytes()
		}
	} else {
		body = append(body[:maxErrorBody:maxErrorBody], "…"...)
	}
	b, err := json.Marshal(strings.ToValidUTF8(string(body), "\uFFFD"))
	if err != nil {
		panic("sendgrid: encode error body: " + err.Error()) // A valid UTF-8 string always encodes.
	}
	return b
}

// redacted is what replaces the API key should an answer ever echo it.
const redacted = "[REDACTED]"

// scrub removes key from a DispatchError's message, body and wrapped error.
func scrub(de *vendorapi.DispatchError, key string) *vendorapi.DispatchError {
	de.Message = strings.ReplaceAll(de.Message, key, redacted)
	de.Body = bytes.ReplaceAll(de.Body, []byte(key), []byte(redacted))
	if de.Err != nil && strings.Contains(de.Err.Error(), key) {
		de.Err = &scrubbedError{err: de.Err, key: key}
	}
	return de
}

// scrubbedError is an error whose text never shows the API key.
type scrubbedError struct {
	err error
	key string
}

func (e *scrubbedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.key, redacted) }
func (e *scrubbedError) Unwrap() error { return e.err }
