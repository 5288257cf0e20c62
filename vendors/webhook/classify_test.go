package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/vendorapi"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	refused := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}}
	reset := &url.Error{Op: "Post", URL: "http://h/x", Err: errors.New("read: connection reset by peer")}
	timeout := &url.Error{Op: "Post", URL: "http://h/x", Err: context.DeadlineExceeded}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	tests := []struct {
		name        string
		a           answer
		wantOutcome vendorapi.Outcome // 0: success
		wantCode    string
		wantRef     string
		wantResult  string
		wantRetry   time.Duration
		wantReplay  bool
	}{
		{name: "refused before sending", a: answer{err: refused}, wantOutcome: vendorapi.OutcomeRetryable, wantCode: "not_sent"},
		{name: "timeout before sending", a: answer{err: timeout}, wantOutcome: vendorapi.OutcomeRetryable, wantCode: "not_sent"},
		{name: "cancelled before sending", a: answer{err: context.Canceled}, wantOutcome: vendorapi.OutcomeRetryable, wantCode: "not_sent"},
		{name: "timeout after sending", a: answer{err: timeout, mayHaveArrived: true}, wantOutcome: vendorapi.OutcomeUnknown, wantCode: "timeout"},
		{name: "reset after sending", a: answer{err: reset, mayHaveArrived: true}, wantOutcome: vendorapi.OutcomeUnknown, wantCode: "connection_lost"},
		{name: "cancelled after sending", a: answer{err: context.Canceled, mayHaveArrived: true}, wantOutcome: vendorapi.OutcomeUnknown, wantCode: "connection_lost"},
		{
			name: "200 with request id", a: answer{status: 200, header: hdr("X-Request-Id", "req_1"), body: []byte(`{"id":"obj_1"}`)},
			wantRef: "req_1", wantResult: `{"status":200,"body":{"id":"obj_1"}}`,
		},
		{
			name: "201 with body id", a: answer{status: 201, header: hdr(), body: []byte(`{"id": "obj_1", "x": [1, 2]}`)},
			wantRef: "obj_1", wantResult: `{"status":201,"body":{"id":"obj_1","x":[1,2]}}`,
		},
		{
			name: "200 with numeric id", a: answer{status: 200, header: hdr(), body: []byte(`{"id":42}`)},
			wantRef: "42", wantResult: `{"status":200,"body":{"id":42}}`,
		},
		{
			name: "204 without body", a: answer{status: 204, header: hdr()},
			wantRef: "204", wantResult: `{"status":204,"body":""}`,
		},
		{
			name: "200 with text", a: answer{status: 200, header: hdr(), body: []byte("thanks")},
			wantRef: "200", wantResult: `{"status":200,"body":"thanks"}`,
		},
		{name: "409", a: answer{status: 409, header: hdr()}, wantOutcome: vendorapi.OutcomeRetryable, wantCode: "conflict_in_use"},
		{
			name: "429 seconds", a: answer{status: 429, header: hdr("Retry-After", "3"), now: now},
			wantOutcome: vendorapi.OutcomeRetryable, wantCode: "rate_limited", wantRetry: 3 * time.Second,
		},
		{
			name: "429 date", a: answer{status: 429, header: hdr("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), now: now},
			wantOutcome: vendorapi.OutcomeRetryable, wantCode: "rate_limited", wantRetry: 90 * time.Second,
		},
		{
			name: "400", a: answer{status: 400, header: hdr(), body: []byte(`{"error":"bad"}`)},
			wantOutcome: vendorapi.OutcomePermanent, wantCode: "http_4xx", wantResult: `{"status":400,"body":{"error":"bad"}}`,
		},
		{name: "408", a: answer{status: 408, header: hdr()}, wantOutcome: vendorapi.OutcomePermanent, wantCode: "http_4xx", wantResult: `{"status":408,"body":""}`},
		{name: "404", a: answer{status: 404, header: hdr()}, wantOutcome: vendorapi.OutcomePermanent, wantCode: "http_4xx", wantResult: `{"status":404,"body":""}`},
		{name: "302", a: answer{status: 302, header: hdr()}, wantOutcome: vendorapi.OutcomePermanent, wantCode: "http_3xx", wantResult: `{"status":302,"body":""}`},
		{
			name: "500", a: answer{status: 500, header: hdr(), body: []byte("oops")},
			wantOutcome: vendorapi.OutcomeUnknown, wantCode: "http_5xx", wantResult: `{"status":500,"body":"oops"}`,
		},
		{
			name: "503 replayed", a: answer{status: 503, header: hdr("Idempotent-Replayed", "true")},
			wantOutcome: vendorapi.OutcomeUnknown, wantCode: "http_5xx", wantResult: `{"status":503,"body":""}`, wantReplay: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, de := classify(tt.a, 1024)
			if tt.wantOutcome == 0 {
				require.Nil(t, de)
				require.Equal(t, tt.wantRef, res.VendorRef)
				require.JSONEq(t, tt.wantResult, string(res.Result))
				return
			}
			require.Nil(t, res)
			require.Equal(t, tt.wantOutcome, de.Outcome)
			require.Equal(t, tt.wantCode, de.Code)
			require.Equal(t, tt.a.status, de.HTTPStatus)
			require.Equal(t, tt.wantRetry, de.RetryAfter)
			require.Equal(t, tt.wantReplay, de.Replayed)
			if tt.wantResult != "" {
				require.JSONEq(t, tt.wantResult, string(de.Body))
			}
			if tt.a.err != nil {
				require.ErrorIs(t, de, tt.a.err)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, 5*time.Second, parseRetryAfter("5", now))
	require.Equal(t, 2*time.Minute, parseRetryAfter(now.Add(2*time.Minute).Format(http.TimeFormat), now))
	require.Zero(t, parseRetryAfter(now.Add(-time.Minute).Format(http.TimeFormat), now))
	require.Zero(t, parseRetryAfter("", now))
	require.Zero(t, parseRetryAfter("-3", now))
	require.Zero(t, parseRetryAfter("soon", now))
	require.Equal(t, 24*time.Hour, parseRetryAfter("999999999999", now))
}

func TestResultJSONTruncates(t *testing.T) {
	t.Parallel()
	body := []byte(`{"text":"` + strings.Repeat("é", 20) + `"}`)
	got := resultJSON(200, body, 16)
	require.JSONEq(t, `{"status":200,"body":"{\"text\":\"ééé","truncated":true}`, string(got))
}

func TestRedact(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{"a":"[REDACTED]"}`, string(redact([]byte(`{"a":"Bearer tok-123"}`), "Bearer tok-123")))
	require.Equal(t, `token [REDACTED] echoed`, string(redact([]byte(`token tok-123 echoed`), "Bearer tok-123")))
	require.Equal(t, `{"a":"[REDACTED]"}`, string(redact([]byte(`{"a":"x\"y\\z"}`), `x"y\z`)))
	require.Equal(t, "unchanged", string(redact([]byte("unchanged"), "")))

	de := scrub(&vendorapi.DispatchError{Message: "saw sec-ret", Err: fmt.Errorf("wrapped: %w", errors.New("sec-ret"))}, "sec-ret")
	require.NotContains(t, de.Error(), "sec-ret")
	require.NotContains(t, de.Err.Error(), "sec-ret")
}

func TestJoinURL(t *testing.T) {
	t.Parallel()
	u, err := joinURL("https://h.example.com/hooks/", "/a/b", nil)
	require.NoError(t, err)
	require.Equal(t, "https://h.example.com/hooks/a/b", u)

	u, err = joinURL("https://h.example.com", "/_lookup", url.Values{"oncebox_op": {"op 1"}})
	require.NoError(t, err)
	require.Equal(t, "https://h.example.com/_lookup?oncebox_op=op+1", u)

	for _, path := range []string{"/a/../b", "/%2e%2e/admin", "/a#frag"} {
		_, err := joinURL("https://h.example.com", path, nil)
		require.Error(t, err, path)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Target{BaseURL: "https://h.example.com"}
	tests := map[string]Config{
		"no targets":          {},
		"relative URL":        {Targets: map[string]Target{"t": {BaseURL: "/hooks"}}},
		"ftp URL":             {Targets: map[string]Target{"t": {BaseURL: "ftp://h.example.com"}}},
		"credentials in URL":  {Targets: map[string]Target{"t": {BaseURL: "https://u:p@h.example.com"}}},
		"secret no header":    {Targets: map[string]Target{"t": {BaseURL: ok.BaseURL, Secret: "s"}}},
		"header no secret":    {Targets: map[string]Target{"t": {BaseURL: ok.BaseURL, SecretHeader: "X-S"}}},
		"bad header name":     {Targets: map[string]Target{"t": {BaseURL: ok.BaseURL, SecretHeader: "X S", Secret: "s"}}},
		"empty target name":   {Targets: map[string]Target{"": ok}},
		"relative LookupPath": {Targets: map[string]Target{"t": ok}, LookupPath: "_lookup"},
		"negative timeout":    {Targets: map[string]Target{"t": ok}, Timeout: -time.Second},
	}
	for name, cfg := range tests {
		_, err := New(cfg)
		require.Error(t, err, name)
	}
	v, err := New(Config{Targets: map[string]Target{"t": ok}, NativeIdempotency: true})
	require.NoError(t, err)
	require.Equal(t, vendorapi.Idempotency{Native: true, Window: 24 * time.Hour}, v.Idempotency())
	require.Equal(t, 10*time.Second, v.cfg.Timeout)
	require.Equal(t, 16<<10, v.cfg.MaxResultBytes)
}
