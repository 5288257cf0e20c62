package stripe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripego "github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/vendorapi"
)

// apiErr builds the *stripego.Error stripe-go returns for an answer.
func apiErr(status int, typ stripego.ErrorType, code stripego.ErrorCode, header http.Header, raw string) *stripego.Error {
	se := &stripego.Error{HTTPStatusCode: status, Type: typ, Code: code, Msg: "msg"}
	if header == nil {
		header = http.Header{}
	}
	se.LastResponse = &stripego.APIResponse{Header: header, RawJSON: []byte(raw), StatusCode: status}
	return se
}

func TestClassify(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	replayed := http.Header{"Idempotent-Replayed": {"true"}}
	decline := `{"error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds",` +
		`"payment_intent":{"id":"pi_1","client_secret":"pi_1_secret_x","status":"requires_payment_method"}}}`
	dialErr := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	timeoutErr := &url.Error{Op: "Post", URL: "http://x", Err: context.DeadlineExceeded}
	eofErr := &url.Error{Op: "Post", URL: "http://x", Err: errors.New("EOF")}

	declineErr := apiErr(402, stripego.ErrorTypeCard, stripego.ErrorCodeCardDeclined, nil, decline)
	declineErr.DeclineCode = "insufficient_funds"

	for _, tc := range []struct {
		name       string
		err        error
		wrote      bool
		status     int
		outcome    vendorapi.Outcome
		code       string
		bug        bool
		replayed   bool
		retryAfter time.Duration
		body       bool
	}{
		{name: "402 card_error", err: declineErr, wrote: true, status: 402,
			outcome: vendorapi.OutcomePermanent, code: "insufficient_funds", body: true},
		{name: "400 invalid_request_error", err: apiErr(400, stripego.ErrorTypeInvalidRequest, "parameter_unknown", nil, `{"error":{}}`), wrote: true, status: 400,
			outcome: vendorapi.OutcomePermanent, code: "parameter_unknown", body: true},
		{name: "404 invalid_request_error", err: apiErr(404, stripego.ErrorTypeInvalidRequest, "resource_missing", nil, `{"error":{}}`), wrote: true, status: 404,
			outcome: vendorapi.OutcomePermanent, code: "resource_missing", body: true},
		{name: "400 idempotency_error", err: apiErr(400, stripego.ErrorTypeIdempotency, "", nil, `{"error":{}}`), wrote: true, status: 400,
			outcome: vendorapi.OutcomePermanent, code: "idempotency_error", bug: true, body: true},
		{name: "409 key in use", err: apiErr(409, stripego.ErrorTypeInvalidRequest, "idempotency_key_in_use", nil, ""), wrote: true, status: 409,
			outcome: vendorapi.OutcomeRetryable, code: "idempotency_key_in_use"},
		{name: "429 seconds", err: apiErr(429, stripego.ErrorTypeInvalidRequest, "rate_limit", http.Header{"Retry-After": {"7"}}, ""), wrote: true, status: 429,
			outcome: vendorapi.OutcomeRetryable, code: "rate_limit", retryAfter: 7 * time.Second},
		{name: "429 date", err: apiErr(429, stripego.ErrorTypeInvalidRequest, "lock_timeout", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, ""), wrote: true, status: 429,
			outcome: vendorapi.OutcomeRetryable, code: "lock_timeout", retryAfter: 90 * time.Second},
		{name: "429 without Retry-After", err: apiErr(429, stripego.ErrorTypeInvalidRequest, "", nil, ""), wrote: true, status: 429,
			outcome: vendorapi.OutcomeRetryable, code: "rate_limit", retryAfter: defaultRetryAfter},
		{name: "401", err: apiErr(401, stripego.ErrorTypeInvalidRequest, "", nil, ""), wrote: true, status: 401,
			outcome: vendorapi.OutcomeRetryable, code: "authentication"},
		{name: "403", err: apiErr(403, stripego.ErrorTypeInvalidRequest, "permission_denied", nil, ""), wrote: true, status: 403,
			outcome: vendorapi.OutcomePermanent, code: "permission_denied"},
		{name: "403 account_invalid", err: apiErr(403, stripego.ErrorTypeInvalidRequest, "account_invalid", nil, `{"error":{}}`), wrote: true, status: 403,
			outcome: vendorapi.OutcomePermanent, code: "account_invalid", body: true},
		{name: "403 without a code", err: apiErr(403, stripego.ErrorTypeInvalidRequest, "", nil, `{"error":{}}`), wrote: true, status: 403,
			outcome: vendorapi.OutcomePermanent, code: "permission_denied", body: true},
		{name: "500 fresh", err: apiErr(500, stripego.ErrorTypeAPI, "", nil, `{"error":{"type":"api_error"}}`), wrote: true, status: 500,
			outcome: vendorapi.OutcomeUnknown, code: "api_error", body: true},
		{name: "500 replayed", err: apiErr(500, stripego.ErrorTypeAPI, "", replayed, `{"error":{"type":"api_error"}}`), wrote: true, status: 500,
			outcome: vendorapi.OutcomeUnknown, code: "api_error", replayed: true, body: true},
		{name: "503", err: apiErr(503, stripego.ErrorTypeAPI, "", nil, `{"error":{}}`), wrote: true, status: 503,
			outcome: vendorapi.OutcomeUnknown, code: "api_error", body: true},
		{name: "undecodable answer", err: errors.New("Couldn't deserialize JSON (body sample: client_secret)"), wrote: true, status: 502,
			outcome: vendorapi.OutcomeUnknown, code: "unreadable_response"},
		{name: "dial failure", err: dialErr, outcome: vendorapi.OutcomeRetryable, code: "not_sent"},
		{name: "cancelled before sending", err: &url.Error{Op: "Post", URL: "http://x", Err: context.Canceled},
			outcome: vendorapi.OutcomeRetryable, code: "not_sent"},
		{name: "timeout after sending", err: timeoutErr, wrote: true, outcome: vendorapi.OutcomeUnknown, code: "timeout"},
		{name: "EOF after sending", err: eofErr, wrote: true, outcome: vendorapi.OutcomeUnknown, code: "connection_lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			de := classify(tc.err, tc.wrote, tc.status, now)
			require.Equal(t, tc.outcome, de.Outcome)
			require.Equal(t, tc.code, de.Code)
			require.Equal(t, tc.bug, de.Bug)
			require.Equal(t, tc.replayed, de.Replayed)
			require.Equal(t, tc.retryAfter, de.RetryAfter)
			require.Equal(t, tc.status, de.HTTPStatus)
			require.Equal(t, tc.body, len(de.Body) > 0)
			require.NotContains(t, string(de.Body), "secret")
			require.NotContains(t, de.Error(), "secret")
			require.NotContains(t, de.Err.Error(), "secret")
			if tc.outcome == vendorapi.OutcomePermanent || tc.status >= 500 {
				require.NotNil(t, de.Err)
			}
		})
	}
}

func TestErrorBodyDropsSecrets(t *testing.T) {
	t.Parallel()
	got := errorBody([]byte(`{"error":{"payment_intent":{"id":"pi_1","client_secret":"s"},"list":[{"webhook_secret":"w","ok":1}]}}`))
	require.JSONEq(t, `{"error":{"payment_intent":{"id":"pi_1"},"list":[{"ok":1}]}}`, string(got))
	require.Nil(t, errorBody([]byte("<html>")))
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	require.Equal(t, 3*time.Second, parseRetryAfter(" 3 ", now))
	require.Equal(t, time.Duration(0), parseRetryAfter("", now))
	require.Equal(t, time.Duration(0), parseRetryAfter("-1", now))
	require.Equal(t, time.Duration(0), parseRetryAfter("soon", now))
	require.Equal(t, time.Duration(0), parseRetryAfter(now.Add(-time.Minute).Format(http.TimeFormat), now))
	require.Equal(t, time.Hour, parseRetryAfter("999999", now))
}
