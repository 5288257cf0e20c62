package stripe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/stripe"
)

// exchange is one request sent to stripe-mock and the status it got.
type exchange struct {
	method, path, query string
	form                url.Values
	key                 string
	status              int
}

// statusRecorder captures the status a proxied request got.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// TestStripeMockConformance sends every request oncebox makes to stripe-mock,
// Stripe's official mock that validates parameters against the OpenAPI spec,
// through a recording proxy, and requires every one of them to succeed. It skips
// when stripe-mock is not running, unless STRIPE_MOCK_URL is set: then it fails.
func TestStripeMockConformance(t *testing.T) {
	t.Parallel()
	mockURL, required := os.LookupEnv("STRIPE_MOCK_URL")
	required = required && mockURL != ""
	if !required {
		mockURL = "http://127.0.0.1:12111"
	}
	target, err := url.Parse(mockURL)
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", target.Host, time.Second)
	if err != nil {
		msg := "stripe-mock not running at " + mockURL + "; install it with go install github.com/stripe/stripe-mock@v0.203.0 and run stripe-mock -http-port 12111"
		if required {
			// STRIPE_MOCK_URL says stripe-mock is there (CI sets it): a conformance
			// check that silently skips proves nothing.
			t.Fatalf("STRIPE_MOCK_URL is set but nothing answers: %s (%v)", msg, err)
		}
		t.Skip(msg)
	}
	_ = conn.Close()

	var (
		mu        sync.Mutex
		exchanges []exchange
	)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		proxy.ServeHTTP(rec, r)
		mu.Lock()
		exchanges = append(exchanges, exchange{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
			form: form, key: r.Header.Get("Idempotency-Key"), status: rec.status})
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)

	newVendor := func(disableListScan bool) *stripe.Vendor {
		v, err := stripe.New(stripe.Config{APIKey: "sk_test_123", BaseURL: srv.URL, DisableListScan: disableListScan})
		require.NoError(t, err)
		return v
	}
	v := newVendor(false)
	ctx := context.Background()
	dispatch := func(tool, key string, args string) {
		t.Helper()
		res, err := v.Dispatch(ctx, vendorapi.DispatchParams{OpID: "op_" + key, TenantID: 1, Tool: tool,
			Args: json.RawMessage(args), VendorKey: vendorapi.VendorKey(1, key, tool, 0), Attempt: 1})
		require.NoError(t, err, "%s %s", tool, args)
		require.NotEmpty(t, res.VendorRef)
	}

	dispatch(protocol.ToolPaymentIntent, "pi-confirm",
		`{"amount":2000,"currency":"usd","customer":"cus_123","payment_method":"pm_card_visa","confirm":true,"description":"d","metadata":{"order":"A-1"}}`)
	dispatch(protocol.ToolPaymentIntent, "pi-plain", `{"amount":2000,"currency":"usd"}`)
	dispatch(protocol.ToolRefund, "re-pi", `{"payment_intent":"pi_123","amount":100,"reason":"requested_by_customer","metadata":{"k":"v"}}`)
	dispatch(protocol.ToolRefund, "re-ch", `{"charge":"ch_123"}`)

	// Search alone, so that a refused search cannot hide behind the list scan.
	_, err = newVendor(true).Lookup(ctx, vendorapi.LookupParams{OpID: "op_x", Tool: protocol.ToolPaymentIntent, Since: time.Now()})
	require.NoError(t, err)
	_, err = v.Lookup(ctx, vendorapi.LookupParams{OpID: "op_x", Tool: protocol.ToolPaymentIntent, Since: time.Now()})
	require.NoError(t, err)
	_, err = v.Lookup(ctx, vendorapi.LookupParams{OpID: "op_x", Tool: protocol.ToolRefund,
		Args: json.RawMessage(`{"payment_intent":"pi_123","amount":100}`), Since: time.Now()})
	require.NoError(t, err)
	_, err = v.Lookup(ctx, vendorapi.LookupParams{OpID: "op_x", Tool: protocol.ToolRefund,
		Args: json.RawMessage(`{"charge":"ch_123"}`), Since: time.Now()})
	require.NoError(t, err)
	_, err = v.ListObjects(ctx, time.Now().Add(-time.Hour), time.Now())
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	seen := map[string]int{}
	for _, x := range exchanges {
		require.Equalf(t, http.StatusOK, x.status, "%s %s?%s %v", x.method, x.path, x.query, x.form)
		seen[x.method+" "+x.path]++
	}
	require.Equal(t, map[string]int{
		"POST /v1/payment_intents":       2,
		"POST /v1/refunds":               2,
		"GET /v1/payment_intents/search": 2,
		"GET /v1/payment_intents":        2, // Lookup's list scan and ListObjects.
		"GET /v1/refunds":                3, // Two refund lookups and ListObjects.
	}, seen)
	for _, x := range exchanges {
		if x.method == http.MethodPost {
			require.NotEmpty(t, x.form.Get("metadata[oncebox_op]"))
			require.Equal(t, "ob_", x.key[:3], "the derived vendor key, not stripe-go's")
		}
	}
}
