package stripe_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/stripe"
	"github.com/oncebox/oncebox/vendortest"
)

// TestVendorConformance runs the shared vendor suite against the adapter with
// its list scan (lookups that see fresh objects at once) and with search alone
// (lookups as lagged as Stripe's search index).
func TestVendorConformance(t *testing.T) {
	t.Parallel()
	vendortest.Run(t, vendortest.Harness{Name: "list_scan", New: func(tb testing.TB) *vendortest.Instance {
		return newConformanceInstance(tb, false)
	}})
	vendortest.Run(t, vendortest.Harness{Name: "search_only", New: func(tb testing.TB) *vendortest.Instance {
		return newConformanceInstance(tb, true)
	}})
}

// newConformanceInstance returns a Vendor pointed at a fresh fake Stripe.
func newConformanceInstance(tb testing.TB, disableListScan bool) *vendortest.Instance {
	fake := fakestripe.New(fakestripe.Config{HangFor: time.Second})
	refuser := &refuseNextPost{next: fake}
	srv := httptest.NewServer(refuser)
	tb.Cleanup(srv.Close)
	tb.Cleanup(fake.ReleaseHangs) // Runs first: frees hung handlers before Close waits.

	// No keep-alives: a dropped connection must reach the adapter instead of
	// being resent by net/http under the Idempotency-Key.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	tb.Cleanup(tr.CloseIdleConnections)
	v, err := stripe.New(stripe.Config{
		APIKey:          testKey,
		BaseURL:         srv.URL,
		Timeout:         5 * time.Second,
		HTTPClient:      &http.Client{Transport: tr},
		DisableListScan: disableListScan,
	})
	require.NoError(tb, err)

	return &vendortest.Instance{
		Vendor: v,
		Tool:   protocol.ToolPaymentIntent,
		Args: func(i int) json.RawMessage {
			return json.RawMessage(fmt.Sprintf(`{"amount":%d,"currency":"usd","payment_method":"pm_card_visa","confirm":true}`, 1000+i))
		},
		Effects: func(opID string) int {
			pis, refunds := fake.ByTag(vendorapi.TagKey, opID)
			return len(pis) + len(refunds)
		},
		Inject: func(kind string) {
			switch kind {
			case vendortest.FailRetryable:
				fake.InjectFault(fakestripe.Fault{Kind: fakestripe.Fault429, RetryAfter: time.Second})
			case vendortest.FailPermanent:
				refuser.armed.Store(true)
			case vendortest.FailUnknownAfterEffect:
				fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultDropAfterCreate})
			default:
				tb.Fatalf("unknown failure kind %q", kind)
			}
		},
		Expire:                   fake.ExpireIdempotencyKeys,
		SetLookupLag:             fake.SetSearchLag,
		LookupScansUnlaggedLists: !disableListScan,
		Secrets:                  []string{testKey},
	}
}

// refuseNextPost sits in front of the fake. Once armed, it adds an unknown
// parameter to the next POST, which the fake then refuses with its own 400
// parameter_unknown before doing or storing anything: the fake has no fault for
// a refusal that leaves nothing behind (a card decline leaves a payment intent).
type refuseNextPost struct {
	next  http.Handler
	armed atomic.Bool
}

func (h *refuseNextPost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && h.armed.CompareAndSwap(true, false) {
		body, _ := io.ReadAll(r.Body)
		body = append(body, []byte("&oncebox_conformance_refusal=1")...)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	h.next.ServeHTTP(w, r)
}
