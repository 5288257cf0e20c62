package sendgrid_test

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

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/sendgrid"
	"github.com/oncebox/oncebox/vendortest"
)

// TestVendorConformance runs the shared vendor suite against the adapter.
func TestVendorConformance(t *testing.T) {
	t.Parallel()
	vendortest.Run(t, vendortest.Harness{Name: "sendgrid", New: newConformanceInstance})
}

// newConformanceInstance returns a Vendor pointed at a fresh fake SendGrid,
// neither of them rate-limiting the Email Activity API.
func newConformanceInstance(tb testing.TB) *vendortest.Instance {
	fake := fakesendgrid.New(fakesendgrid.Config{ActivityRatePerMinute: -1, HangFor: time.Second})
	refuser := &refuseNextSend{next: fake}
	srv := httptest.NewServer(refuser)
	tb.Cleanup(srv.Close)

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tb.Cleanup(tr.CloseIdleConnections)
	v, err := sendgrid.New(sendgrid.Config{
		APIKey:                testKey,
		BaseURL:               srv.URL,
		Timeout:               5 * time.Second,
		HTTPClient:            &http.Client{Transport: tr},
		ActivityRatePerMinute: -1,
	})
	require.NoError(tb, err)

	return &vendortest.Instance{
		Vendor: v,
		Tool:   protocol.ToolMail,
		Args: func(i int) json.RawMessage {
			return json.RawMessage(fmt.Sprintf(`{"from":{"email":"shop@example.com"},"to":[{"email":"customer%d@example.com"}],"subject":"Receipt %d","text":"Thank you."}`, i, i))
		},
		Effects: func(opID string) int { return len(fake.ByCustomArg(vendorapi.TagKey, opID)) },
		Inject: func(kind string) {
			switch kind {
			case vendortest.FailRetryable:
				fake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.Fault429})
			case vendortest.FailPermanent:
				refuser.armed.Store(true)
			case vendortest.FailUnknownAfterEffect:
				fake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.FaultAcceptThenDrop})
			default:
				tb.Fatalf("unknown failure kind %q", kind)
			}
		},
		SetLookupLag: fake.SetActivityLag,
		Secrets:      []string{testKey},
	}
}

// refuseNextSend sits in front of the fake. Once armed, it removes "from" from
// the next POST /v3/mail/send, which the fake then refuses with its own 400
// {"errors":[...]} without storing anything: the fake has no fault for a
// refusal.
type refuseNextSend struct {
	next  http.Handler
	armed atomic.Bool
}

func (h *refuseNextSend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v3/mail/send" && h.armed.CompareAndSwap(true, false) {
		var m map[string]json.RawMessage
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &m); err != nil {
			http.Error(w, "refuseNextSend: "+err.Error(), http.StatusTeapot)
			return
		}
		delete(m, "from")
		body, _ := json.Marshal(m)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	h.next.ServeHTTP(w, r)
}
