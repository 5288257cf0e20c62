package sendgrid

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/vendorapi"
)

func TestClassifySend(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	reset := func(d time.Duration) http.Header {
		return http.Header{"X-Ratelimit-Reset": {strconv.FormatInt(now.Add(d).Unix(), 10)}}
	}
	errorsBody := []byte(`{"errors": [{"message": "Does not contain a valid address.", "field": "from.email", "help": null}]}`)
	compactErrors := `{"errors":[{"message":"Does not contain a valid address.","field":"from.email","help":null}]}`
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

	tests := []struct {
		name       string
		answer     sendAnswer
		outcome    vendorapi.Outcome // 0: success
		code       string
		retryAfter time.Duration
		body       string
	}{
		{name: "202 queued", answer: sendAnswer{status: 202, header: http.Header{"X-Message-Id": {"abc_123"}}}},
		{name: "200 sandbox", answer: sendAnswer{status: 200, header: http.Header{"X-Message-Id": {"abc_123"}}}},
		{name: "400 invalid", answer: sendAnswer{status: 400, body: errorsBody}, outcome: vendorapi.OutcomePermanent, code: "bad_request", body: compactErrors},
		{name: "401 bad key", answer: sendAnswer{status: 401, body: errorsBody}, outcome: vendorapi.OutcomePermanent, code: "unauthorized", body: compactErrors},
		{name: "403 sender not verified", answer: sendAnswer{status: 403, body: errorsBody}, outcome: vendorapi.OutcomePermanent, code: "forbidden", body: compactErrors},
		{name: "413 too large", answer: sendAnswer{status: 413, body: errorsBody}, outcome: vendorapi.OutcomePermanent, code: "payload_too_large", body: compactErrors},
		{name: "400 not JSON", answer: sendAnswer{status: 400, body: []byte("bad\n")}, outcome: vendorapi.OutcomePermanent, code: "bad_request", body: `"bad"`},
		{name: "429 reset in 5s", answer: sendAnswer{status: 429, header: reset(5 * time.Second), now: now}, outcome: vendorapi.OutcomeRetryable, code: "rate_limited", retryAfter: 5 * time.Second},
		{name: "429 reset now", answer: sendAnswer{status: 429, header: reset(0), now: now}, outcome: vendorapi.OutcomeRetryable, code: "rate_limited", retryAfter: time.Second},
		{name: "429 reset in the past", answer: sendAnswer{status: 429, header: reset(-time.Minute), now: now}, outcome: vendorapi.OutcomeRetryable, code: "rate_limited", retryAfter: time.Second},
		{name: "429 reset far away", answer: sendAnswer{status: 429, header: reset(48 * time.Hour), now: now}, outcome: vendorapi.OutcomeRetryable, code: "rate_limited", retryAfter: time.Hour},
		{name: "429 without reset", answer: sendAnswer{status: 429, now: now}, outcome: vendorapi.OutcomeRetryable, code: "rate_limited", retryAfter: time.Second},
		{name: "429 malformed reset", answer: sendAnswer{status: 429, header: http.Header{"X-Ratelimit-Reset": {"soon"}}, now: now}, outcome: vendorapi.OutcomeRetryable, code: "rate_limited", retryAfter: time.Second},
		{name: "500", answer: sendAnswer{status: 500, body: errorsBody}, outcome: vendorapi.OutcomeUnknown, code: "server_error", body: compactErrors},
		{name: "502", answer: sendAnswer{status: 502}, outcome: vendorapi.OutcomeUnknown, code: "server_error"},
		{name: "503", answer: sendAnswer{status: 503}, outcome: vendorapi.OutcomeUnknown, code: "server_error"},
		{name: "404", answer: sendAnswer{status: 404}, outcome: vendorapi.OutcomeUnknown, code: "unexpected_status"},
		{name: "409", answer: sendAnswer{status: 409}, outcome: vendorapi.OutcomeUnknown, code: "unexpected_status"},
		{name: "301", answer: sendAnswer{status: 301}, outcome: vendorapi.OutcomeUnknown, code: "unexpected_status"},
		{name: "100", answer: sendAnswer{status: 100}, outcome: vendorapi.OutcomeUnknown, code: "unexpected_status"},
		{name: "connection refused", answer: sendAnswer{err: refused}, outcome: vendorapi.OutcomeRetryable, code: "not_sent"},
		{name: "cancelled before writing", answer: sendAnswer{err: context.Canceled}, outcome: vendorapi.OutcomeRetryable, code: "not_sent"},
		{name: "timeout before writing", answer: sendAnswer{err: context.DeadlineExceeded}, outcome: vendorapi.OutcomeRetryable, code: "not_sent"},
		{name: "timeout after writing", answer: sendAnswer{err: timeout, wrote: true}, outcome: vendorapi.OutcomeUnknown, code: "timeout"},
		{name: "deadline after writing", answer: sendAnswer{err: context.DeadlineExceeded, wrote: true}, outcome: vendorapi.OutcomeUnknown, code: "timeout"},
		{name: "EOF after writing", answer: sendAnswer{err: io.EOF, wrote: true}, outcome: vendorapi.OutcomeUnknown, code: "connection_lost"},
		{name: "reset after writing", answer: sendAnswer{err: syscall.ECONNRESET, wrote: true}, outcome: vendorapi.OutcomeUnknown, code: "connection_lost"},
		{name: "cancelled after writing", answer: sendAnswer{err: context.Canceled, wrote: true}, outcome: vendorapi.OutcomeUnknown, code: "connection_lost"},
		{name: "no error, no status", answer: sendAnswer{wrote: true}, outcome: vendorapi.OutcomeUnknown, code: "connection_lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, de := classifySend(tt.answer)
			if tt.outcome == 0 {
				require.Nil(t, de)
				require.Equal(t, "abc_123", res.VendorRef)
				require.JSONEq(t, `{"message_id":"abc_123","status":`+strconv.Itoa(tt.answer.status)+`}`, string(res.Result))
				return
			}
			require.Nil(t, res)
			require.NotNil(t, de)
			require.Equal(t, tt.outcome, de.Outcome)
			require.Equal(t, tt.code, de.Code)
			require.Equal(t, tt.answer.status, de.HTTPStatus)
			require.Equal(t, tt.retryAfter, de.RetryAfter)
			require.Equal(t, tt.body, string(de.Body))
			if tt.answer.err != nil {
				require.ErrorIs(t, de, tt.answer.err)
			}
		})
	}
}

func TestErrorBodyCutsHugeBodies(t *testing.T) {
	t.Parallel()
	huge := make([]byte, maxErrorBody+100)
	for i := range huge {
		huge[i] = 'x'
	}
	b := errorBody(huge)
	require.Less(t, len(b), maxErrorBody+10)
	require.Equal(t, byte('"'), b[0])
}

func TestScrubRemovesKey(t *testing.T) {
	t.Parallel()
	de := scrub(&vendorapi.DispatchError{
		Message: "echo Bearer SG.k", Body: []byte(`{"auth":"Bearer SG.k"}`), Err: errors.New("got SG.k"),
	}, "SG.k")
	require.Equal(t, "echo Bearer [REDACTED]", de.Message)
	require.JSONEq(t, `{"auth":"Bearer [REDACTED]"}`, string(de.Body))
	require.Equal(t, "got [REDACTED]", de.Err.Error())
}
