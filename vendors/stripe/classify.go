package stripe

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/vendorapi"
)

// defaultRetryAfter is the wait after a 429 that carried no usable Retry-After.
const defaultRetryAfter = 2 * time.Second

// classify turns a failed stripe-go call into a *vendorapi.DispatchError. wrote
// says whether the request may have reached Stripe whole (an HTTP request was
// written on some connection); status is the HTTP status of the last answer
// seen, 0 when none came back. now is when the call ended, for an HTTP-date
// Retry-After.
func classify(err error, wrote bool, status int, now time.Time) *vendorapi.DispatchError {
	var se *stripego.Error
	if errors.As(err, &se) && se.HTTPStatusCode != 0 {
		return classifyAPIError(se, now)
	}
	if status != 0 {
		// An answer came but stripe-go could not read or decode it. Its error
		// text quotes the body, which may hold a client_secret: leave it out.
		return &vendorapi.DispatchError{
			Outcome:    vendorapi.OutcomeUnknown,
			Code:       "unreadable_response",
			HTTPStatus: status,
			Message:    "Stripe answered HTTP " + strconv.Itoa(status) + " but the answer could not be read or decoded; it may have acted",
			Err:        errors.New("stripe: unreadable answer with HTTP " + strconv.Itoa(status)),
		}
	}
	return vendorapi.ClassifyTransport("Stripe", err, wrote)
}

// classifyAPIError classifies an answer Stripe gave, following docs/vendors.md.
func classifyAPIError(se *stripego.Error, now time.Time) *vendorapi.DispatchError {
	var header http.Header
	var raw []byte
	if se.LastResponse != nil {
		header = se.LastResponse.Header
		raw = se.LastResponse.RawJSON
	}
	status := se.HTTPStatusCode
	de := &vendorapi.DispatchError{
		HTTPStatus: status,
		Replayed:   header.Get("Idempotent-Replayed") == "true",
		Message:    errorMessage(se),
		Err:        &apiError{se: se},
	}
	code := string(se.Code)
	switch {
	case status >= 500:
		// Stripe stores a 500 under the key once the endpoint started, and
		// replays it: the call may or may not have acted.
		de.Outcome, de.Code = vendorapi.OutcomeUnknown, orDefault(code, "api_error")
		de.Body = errorBody(raw)
	case status == http.StatusConflict:
		de.Outcome, de.Code = vendorapi.OutcomeRetryable, orDefault(code, "idempotency_key_in_use")
	case status == http.StatusTooManyRequests:
		de.Outcome, de.Code = vendorapi.OutcomeRetryable, orDefault(code, "rate_limit")
		de.RetryAfter = parseRetryAfter(header.Get("Retry-After"), now)
		if de.RetryAfter == 0 {
			de.RetryAfter = defaultRetryAfter
		}
	case status == http.StatusUnauthorized:
		// Stripe stores nothing for it, and a bad key is for an operator to
		// fix (a rotated key): retry, then needs_review once exhausted.
		de.Outcome, de.Code = vendorapi.OutcomeRetryable, "authentication"
	case status == http.StatusForbidden:
		// The key is valid but may not act here: a Connect account the platform
		// does not reach (account_invalid), or a restricted key without the
		// permission. Stripe stores nothing, and the same request will be refused
		// again: the op fails, with a sentence that says what to fix.
		de.Outcome, de.Code = vendorapi.OutcomePermanent, orDefault(code, "permission_denied")
		de.Message = forbiddenMessage(code) + " Stripe said: " + de.Message
		de.Body = errorBody(raw)
	case se.Type == stripego.ErrorTypeIdempotency:
		de.Outcome, de.Code, de.Bug = vendorapi.OutcomePermanent, "idempotency_error", true
		de.Message = "bug in oncebox: Stripe saw this op's vendor key with other parameters: " + de.Message
		de.Body = errorBody(raw)
	case status == http.StatusPaymentRequired || se.Type == stripego.ErrorTypeCard:
		de.Outcome, de.Code = vendorapi.OutcomePermanent, orDefault(string(se.DeclineCode), orDefault(code, "card_error"))
		de.Body = errorBody(raw)
	case status >= 400:
		de.Outcome, de.Code = vendorapi.OutcomePermanent, orDefault(code, orDefault(string(se.Type), "invalid_request_error"))
		de.Body = errorBody(raw)
	default:
		de.Outcome, de.Code = vendorapi.OutcomeUnknown, "unexpected_status"
		de.Body = errorBody(raw)
	}
	return de
}

// forbiddenMessage says what a 403 means and what to fix.
func forbiddenMessage(code string) string {
	if code == "account_invalid" {
		return "Stripe refused the Stripe account this op was sent to: it is not connected to this installation's platform " +
			"(or no longer is). Nothing was charged. Fix the tenant's Stripe setting (oncebox tenant vendor set or delete), then send the op again under a new key."
	}
	return "Stripe refused this installation's key for this request (a restricted key without the permission, or an account it may not act on). " +
		"Nothing was done. Fix the key's permissions or the tenant's Stripe setting, then send the op again under a new key."
}

// apiError wraps a *stripego.Error for DispatchError.Err. stripego.Error's own
// Error() prints the whole error object, including an embedded payment
// intent's client_secret; this one prints only what is safe.
type apiError struct {
	se *stripego.Error
}

func (e *apiError) Error() string {
	s := "stripe: HTTP " + strconv.Itoa(e.se.HTTPStatusCode) + " " + string(e.se.Type)
	if e.se.Code != "" {
		s += " " + string(e.se.Code)
	}
	if e.se.RequestID != "" {
		s += " (request " + e.se.RequestID + ")"
	}
	return s + ": " + e.se.Msg
}

// Unwrap returns the stripe-go error, for errors.As.
func (e *apiError) Unwrap() error { return e.se }

// errorMessage is Stripe's human message, with its type for context.
func errorMessage(se *stripego.Error) string {
	msg := se.Msg
	if msg == "" {
		msg = "Stripe answered HTTP " + strconv.Itoa(se.HTTPStatusCode)
	}
	if se.RequestID != "" {
		msg += " (request " + se.RequestID + ")"
	}
	return msg
}

// errorBody is Stripe's error JSON without secrets: every "client_secret" (an
// error about a payment intent embeds the whole payment intent) and any other
// key ending in "secret" is dropped. It returns nil when raw is not JSON.
func errorBody(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	b, err := json.Marshal(dropSecrets(v))
	if err != nil {
		return nil
	}
	return b
}

// dropSecrets removes secret-looking keys from a decoded JSON value.
func dropSecrets(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if strings.HasSuffix(strings.ToLower(k), "secret") {
				delete(x, k)
				continue
			}
			x[k] = dropSecrets(val)
		}
	case []any:
		for i, val := range x {
			x[i] = dropSecrets(val)
		}
	}
	return v
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
// It returns 0 when v is empty, malformed or in the past; it caps the wait at
// an hour.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		d = time.Duration(min(secs, 3600)) * time.Second
	} else if t, err := http.ParseTime(v); err == nil && t.After(now) {
		d = t.Sub(now)
	}
	return min(d, time.Hour)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
