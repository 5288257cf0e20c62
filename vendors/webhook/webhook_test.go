package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/testkit/testlog"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

const (
	secretHeader = "X-Webhook-Secret"
	secret       = "whsec-5f3a9c1e-do-not-leak"
)

func startFake(t *testing.T, cfg fakewebhook.Config) (*fakewebhook.Server, *httptest.Server) {
	t.Helper()
	fake := fakewebhook.New(cfg)
	srv := httptest.NewServer(fake)
	t.Cleanup(func() {
		fake.ReleaseHangs()
		srv.Close()
	})
	return fake, srv
}

// newVendor returns a Vendor with one target, "hooks", at baseURL.
func newVendor(t *testing.T, baseURL string, mutate func(*webhook.Config)) *webhook.Vendor {
	t.Helper()
	cfg := webhook.Config{
		Targets: map[string]webhook.Target{
			"hooks": {BaseURL: baseURL, SecretHeader: secretHeader, Secret: secret},
		},
		Timeout: 2 * time.Second,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	v, err := webhook.New(cfg)
	require.NoError(t, err)
	return v
}

func params(opID, args string) vendorapi.DispatchParams {
	return vendorapi.DispatchParams{
		OpID:      opID,
		TenantID:  1,
		Tool:      "webhook.post",
		Args:      json.RawMessage(args),
		VendorKey: "vk-" + opID,
		Attempt:   1,
	}
}

func requireDispatchError(t *testing.T, err error, outcome vendorapi.Outcome, code string) *vendorapi.DispatchError {
	t.Helper()
	var de *vendorapi.DispatchError
	require.ErrorAs(t, err, &de)
	require.Equal(t, outcome, de.Outcome, de.Error())
	require.Equal(t, code, de.Code, de.Error())
	return de
}

func TestDispatchSendsBodyAndHeaders(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, fakewebhook.Config{})
	v := newVendor(t, srv.URL, nil)

	res, err := v.Dispatch(t.Context(), params("op-1", `{"target":"hooks","path":"/orders/7","body":{"amount":1200}}`))
	require.NoError(t, err)

	effects := fake.Effects()
	require.Len(t, effects, 1)
	e := effects[0]
	require.Equal(t, "/orders/7", e.Path)
	require.JSONEq(t, `{"amount":1200}`, string(e.Body))
	require.Equal(t, "vk-op-1", e.Headers.Get("Idempotency-Key"))
	require.Equal(t, "op-1", e.Headers.Get("Oncebox-Op"))
	require.Equal(t, secret, e.Headers.Get(secretHeader))
	require.Equal(t, "application/json", e.Headers.Get("Content-Type"))
	require.Equal(t, e.ID, res.VendorRef)
	require.JSONEq(t, `{"status":200,"body":{"id":"`+e.ID+`","ok":true}}`, string(res.Result))
}

func TestDispatchSendsEmptyObjectForNoBody(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, fakewebhook.Config{})
	v := newVendor(t, srv.URL, nil)

	_, err := v.Dispatch(t.Context(), params("op-1", `{"target":"hooks","path":"/ping"}`))
	require.NoError(t, err)
	_, err = v.Dispatch(t.Context(), params("op-2", `{"target":"hooks","path":"/ping","body":null}`))
	require.NoError(t, err)
	for _, e := range fake.Effects() {
		require.Equal(t, "{}", string(e.Body))
	}
	require.Equal(t, 2, fake.EffectCount())
}

func TestDispatchOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fault       fakewebhook.Fault
		wantOutcome vendorapi.Outcome
		wantCode    string
		wantStatus  int
		wantEffects int
		wantBody    string
		wantRetry   time.Duration
	}{
		{"429 with Retry-After", fakewebhook.Fault{Kind: fakewebhook.Fault429, RetryAfter: 2 * time.Second}, vendorapi.OutcomeRetryable, "rate_limited", 429, 0, "", 2 * time.Second},
		{"409", fakewebhook.Fault{Kind: fakewebhook.Fault409}, vendorapi.OutcomeRetryable, "conflict_in_use", 409, 0, "", 0},
		{"400", fakewebhook.Fault{Kind: fakewebhook.FaultReject, Status: 400}, vendorapi.OutcomePermanent, "http_4xx", 400, 0, `{"status":400,"body":{"error":"rejected"}}`, 0},
		{"408", fakewebhook.Fault{Kind: fakewebhook.FaultReject, Status: 408}, vendorapi.OutcomePermanent, "http_4xx", 408, 0, `{"status":408,"body":{"error":"rejected"}}`, 0},
		{"500 after effect", fakewebhook.Fault{Kind: fakewebhook.Fault500AfterEffect}, vendorapi.OutcomeUnknown, "http_5xx", 500, 1, `{"status":500,"body":{"error":"internal"}}`, 0},
		{"500 without effect", fakewebhook.Fault{Kind: fakewebhook.Fault500Stored}, vendorapi.OutcomeUnknown, "http_5xx", 500, 0, `{"status":500,"body":{"error":"internal"}}`, 0},
		{"drop after effect", fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect}, vendorapi.OutcomeUnknown, "connection_lost", 0, 1, "", 0},
		// The request was written whole: the adapter cannot know that the
		// receiver dropped it unread.
		{"drop before effect", fakewebhook.Fault{Kind: fakewebhook.FaultDropBeforeEffect}, vendorapi.OutcomeUnknown, "connection_lost", 0, 0, "", 0},
		{"hang past timeout", fakewebhook.Fault{Kind: fakewebhook.FaultHangAfterEffect}, vendorapi.OutcomeUnknown, "timeout", 0, 1, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The timeout is short enough for the hang to pass it and long enough that an
			// answer on a loaded machine (the race detector, two cores) still arrives in time.
			fake, srv := startFake(t, fakewebhook.Config{HangFor: 6 * time.Second})
			v := newVendor(t, srv.URL, func(c *webhook.Config) { c.Timeout = 2 * time.Second })
			fake.InjectFault(tt.fault)

			res, err := v.Dispatch(t.Context(), params("op-1", `{"target":"hooks","path":"/x","body":{}}`))
			require.Nil(t, res)
			de := requireDispatchError(t, err, tt.wantOutcome, tt.wantCode)
			require.Equal(t, tt.wantStatus, de.HTTPStatus)
			require.Equal(t, tt.wantRetry, de.RetryAfter)
			if tt.wantBody != "" {
				require.JSONEq(t, tt.wantBody, string(de.Body))
			}
			require.Equal(t, tt.wantEffects, fake.EffectCount())
			require.Equal(t, 1, fake.Requests())
		})
	}
}

func TestDispatchConnectionRefusedIsRetryable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	v := newVendor(t, "http://"+addr, nil)

	_, err = v.Dispatch(t.Context(), params("op-1", `{"target":"hooks","path":"/x"}`))
	requireDispatchError(t, err, vendorapi.OutcomeRetryable, "not_sent")
}

func TestDispatchDNSFailureIsRetryable(t *testing.T) {
	t.Parallel()
	v := newVendor(t, "http://no-such-host.invalid", func(c *webhook.Config) { c.Timeout = time.Second })

	_, err := v.Dispatch(t.Context(), params("op-1", `{"target":"hooks","path":"/x"}`))
	requireDispatchError(t, err, vendorapi.OutcomeRetryable, "not_sent")
}

func TestDispatchCancelledBeforeSendingIsRetryable(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, fakewebhook.Config{})
	v := newVendor(t, srv.URL, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := v.Dispatch(ctx, params("op-1", `{"target":"hooks","path":"/x"}`))
	requireDispatchError(t, err, vendorapi.OutcomeRetryable, "not_sent")
	require.Zero(t, fake.Requests())
}

func TestDispatchCancelledMidRequestIsUnknown(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, fakewebhook.Config{})
	v := newVendor(t, srv.URL, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	release := make(chan struct{})
	defer close(release)
	fake.SetBlock(release)
	fake.EffectHook(func(fakewebhook.Effect) { cancel() })

	_, err := v.Dispatch(ctx, params("op-1", `{"target":"hooks","path":"/x"}`))
	requireDispatchError(t, err, vendorapi.OutcomeUnknown, "connection_lost")
	require.Equal(t, 1, fake.EffectCount())
}

func TestDispatchRefusesWhatIsNotAllowed(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, fakewebhook.Config{})
	v := newVendor(t, srv.URL, nil)
	require.True(t, v.HasTarget("hooks"))
	require.False(t, v.HasTarget("elsewhere"))

	_, err := v.Dispatch(t.Context(), params("op-1", `{"target":"elsewhere","path":"/x"}`))
	requireDispatchError(t, err, vendorapi.OutcomePermanent, "unknown_target")
	_, err = v.Dispatch(t.Context(), params("op-2", `{"target":"hooks","path":"/a/../../admin"}`))
	requireDispatchError(t, err, vendorapi.OutcomePermanent, "invalid_path")
	_, err = v.Dispatch(t.Context(), params("op-3", `{"target":"hooks","path":"@evil.example.com/x"}`))
	requireDispatchError(t, err, vendorapi.OutcomePermanent, "invalid_args")
	require.Zero(t, fake.Requests())
}

// net/http resends a request with an Idempotency-Key header on its own when a
// kept-alive connection drops without an answer; the adapter must not let it.
func TestDispatchDoesNotResendOnDroppedKeptAliveConnection(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, fakewebhook.Config{})
	v := newVendor(t, srv.URL, func(c *webhook.Config) { c.HTTPClient = srv.Client() })

	_, err := v.Dispatch(t.Context(), params("op-1", `{"target":"hooks","path":"/x"}`))
	require.NoError(t, err)
	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect})
	_, err = v.Dispatch(t.Context(), params("op-2", `{"target":"hooks","path":"/x"}`))
	requireDispatchError(t, err, vendorapi.OutcomeUnknown, "connection_lost")
	require.Equal(t, 2, fake.Requests())
	require.Len(t, fake.EffectsFor("op-2"), 1)
}

func TestDispatchAgainstKeyHonouringTarget(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, fakewebhook.Config{HonourKeys: true})
	v := newVendor(t, srv.URL, func(c *webhook.Config) { c.NativeIdempotency = true })
	require.Equal(t, vendorapi.Idempotency{Native: true, Window: 24 * time.Hour}, v.Idempotency())

	p := params("op-1", `{"target":"hooks","path":"/x"}`)
	first, err := v.Dispatch(t.Context(), p)
	require.NoError(t, err)
	second, err := v.Dispatch(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, first, second)
	require.Equal(t, 1, fake.EffectCount())

	// A stored 500 is replayed under its key and said to be.
	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault500Stored})
	p = params("op-2", `{"target":"hooks","path":"/x"}`)
	_, err = v.Dispatch(t.Context(), p)
	de := requireDispatchError(t, err, vendorapi.OutcomeUnknown, "http_5xx")
	require.False(t, de.Replayed)
	_, err = v.Dispatch(t.Context(), p)
	de = requireDispatchError(t, err, vendorapi.OutcomeUnknown, "http_5xx")
	require.True(t, de.Replayed)
	require.Empty(t, fake.EffectsFor("op-2"))
}

// echoServer answers with the headers it received, secret included, under
// the status named by the path.
func echoServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := json.Marshal(map[string]any{"id": "echo_1", "headers": r.Header, "auth": r.Header.Get("Authorization")})
		status := http.StatusOK
		switch r.URL.Path {
		case "/bad":
			status = http.StatusBadRequest
		case "/boom":
			status = http.StatusInternalServerError
		case "/text":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "your secret is %s", r.Header.Get("Authorization"))
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSecretNeverLeaks(t *testing.T) {
	t.Parallel()
	const bearer = "Bearer sk_live_9f8e7d6c5b4a"
	fake, srv := startFake(t, fakewebhook.Config{HangFor: 5 * time.Second})
	echo := echoServer(t)
	var logs testlog.Buffer
	v, err := webhook.New(webhook.Config{
		Targets: map[string]webhook.Target{
			"hooks": {BaseURL: srv.URL, SecretHeader: secretHeader, Secret: secret},
			"echo":  {BaseURL: echo.URL, SecretHeader: "Authorization", Secret: bearer},
		},
		Timeout:    200 * time.Millisecond,
		LookupPath: "/_lookup",
		Logger:     slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)

	var texts []string
	record := func(res *vendorapi.DispatchResult, err error) {
		if res != nil {
			texts = append(texts, string(res.Result), res.VendorRef)
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			texts = append(texts, e.Error(), fmt.Sprintf("%+v", e))
		}
		var de *vendorapi.DispatchError
		if errors.As(err, &de) {
			texts = append(texts, de.Message, string(de.Body))
		}
	}
	for _, f := range []fakewebhook.FaultKind{0, fakewebhook.Fault429, fakewebhook.Fault409, fakewebhook.FaultReject, fakewebhook.Fault500AfterEffect, fakewebhook.FaultDropAfterEffect, fakewebhook.FaultHangAfterEffect} {
		if f != 0 {
			fake.InjectFault(fakewebhook.Fault{Kind: f})
		}
		record(v.Dispatch(t.Context(), params("op-"+f.String(), `{"target":"hooks","path":"/x"}`)))
	}
	for _, path := range []string{"/ok", "/bad", "/boom", "/text"} {
		record(v.Dispatch(t.Context(), params("op-echo"+path, `{"target":"echo","path":"`+path+`"}`)))
	}
	lr, err := v.Lookup(t.Context(), vendorapi.LookupParams{OpID: "op-0", Args: json.RawMessage(`{"target":"echo","path":"/x"}`)})
	record(nil, err)
	if lr != nil {
		for _, o := range lr.Objects {
			texts = append(texts, string(o.Summary))
		}
	}

	// The secrets did travel, in their headers.
	require.Equal(t, secret, fake.Effects()[0].Headers.Get(secretHeader))
	require.NotEmpty(t, texts)
	texts = append(texts, logs.String())
	for _, text := range texts {
		require.NotContains(t, text, secret)
		require.NotContains(t, text, "sk_live_9f8e7d6c5b4a")
	}
	require.Contains(t, strings.Join(texts, "\n"), "[REDACTED]")
}

// TestDispatchDoesNotFollowRedirects: a target answering 307 to another host: the
// secret header and the body never reach it; the op fails with the 3xx.
func TestDispatchDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var stolen atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { stolen.Add(1) }))
	t.Cleanup(other.Close)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(target.Close)
	_, err := newVendor(t, target.URL, nil).Dispatch(t.Context(), params("op-redirect", `{"target":"hooks","path":"/x"}`))
	require.Error(t, err)
	require.Zero(t, stolen.Load(), "the other host received the request")
}
