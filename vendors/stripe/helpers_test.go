package stripe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/testkit/testlog"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/stripe"
)

// testKey is the API key every test vendor uses; it must never show up in an
// error, a result, a body or a log line.
const testKey = "sk_test_51SeCrEtKeyThatMustNeverLeak"

// recorded is one request as the fake received it.
type recorded struct {
	Method string
	Path   string
	Header http.Header
	Form   url.Values
}

// recorder sits in front of the fake and keeps every request's headers and
// form fields.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	reqs []recorded
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	if r.Method == http.MethodGet {
		form = r.URL.Query()
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, recorded{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Form: form})
	rc.mu.Unlock()
	rc.next.ServeHTTP(w, r)
}

// posts returns the POSTs received on path.
func (rc *recorder) posts(path string) []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []recorded
	for _, r := range rc.reqs {
		if r.Method == http.MethodPost && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// getsOf returns the GETs received on path.
func (rc *recorder) getsOf(path string) []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []recorded
	for _, r := range rc.reqs {
		if r.Method == http.MethodGet && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// harness is a fake Stripe behind a recorder and an httptest.Server, and a
// Vendor pointed at it.
type harness struct {
	fake *fakestripe.Server
	rec  *recorder
	srv  *httptest.Server
	v    *stripe.Vendor
	logs *testlog.Buffer
}

type harnessOpts struct {
	fake fakestripe.Config
	// keepAlive keeps connections open between requests (the default
	// transport); otherwise every request gets its own connection, so a
	// dropped connection reaches the adapter instead of being resent.
	keepAlive bool
	// adjust changes the vendor's Config before New.
	adjust func(*stripe.Config)
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	fake := fakestripe.New(o.fake)
	rec := &recorder{next: fake}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	t.Cleanup(fake.ReleaseHangs) // Runs first: frees hung handlers before Close waits.

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = !o.keepAlive
	t.Cleanup(tr.CloseIdleConnections)
	logs := &testlog.Buffer{}
	cfg := stripe.Config{
		APIKey:     testKey,
		BaseURL:    srv.URL,
		Timeout:    5 * time.Second,
		HTTPClient: &http.Client{Transport: tr},
		Logger:     newLogger(logs),
	}
	if o.adjust != nil {
		o.adjust(&cfg)
	}
	v, err := stripe.New(cfg)
	require.NoError(t, err)
	return &harness{fake: fake, rec: rec, srv: srv, v: v, logs: logs}
}

// dispatch sends one op of tool with args under a vendor key derived from
// key, with op id opID.
func (h *harness) dispatch(t *testing.T, tool, opID, key string, args any) (*vendorapi.DispatchResult, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	return h.v.Dispatch(context.Background(), vendorapi.DispatchParams{
		OpID: opID, TenantID: 1, Tool: tool, Args: raw,
		VendorKey: vendorapi.VendorKey(1, key, tool, 0), Attempt: 1,
	})
}

// piArgs are the args of a confirmed payment intent with payment method pm.
func piArgs(amount int64, pm string) map[string]any {
	return map[string]any{"amount": amount, "currency": "usd", "payment_method": pm, "confirm": true,
		"metadata": map[string]string{"order": "A-1"}}
}

// requireDispatchError asserts err is a *vendorapi.DispatchError and returns it.
func requireDispatchError(t *testing.T, err error) *vendorapi.DispatchError {
	t.Helper()
	require.Error(t, err)
	de, ok := err.(*vendorapi.DispatchError)
	require.Truef(t, ok, "error %T %v is not a *vendorapi.DispatchError", err, err)
	return de
}

// requireNoSecret asserts that none of the texts holds the API key or a
// client secret.
func requireNoSecret(t *testing.T, texts ...string) {
	t.Helper()
	for _, s := range texts {
		require.NotContains(t, s, testKey)
		require.NotContains(t, s, "_secret_")
		require.NotContains(t, s, "client_secret")
	}
}

// newLogger returns a debug-level JSON logger writing to w.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
