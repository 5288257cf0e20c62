package sms_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncebox/oncebox/examples/custom-vendor/fakesms"
	"github.com/oncebox/oncebox/examples/custom-vendor/sms"
	"github.com/oncebox/oncebox/vendortest"
)

// TestVendorConformance runs oncebox's shared vendor conformance suite against the SMS
// adapter and its fake, exactly as oncebox's own adapters do.
func TestVendorConformance(t *testing.T) {
	t.Parallel()
	vendortest.Run(t, vendortest.Harness{Name: "sms", New: func(tb testing.TB) *vendortest.Instance {
		fake := fakesms.New()
		srv := httptest.NewServer(fake)
		tb.Cleanup(srv.Close)
		return &vendortest.Instance{
			Vendor: sms.New(srv.URL, 2*time.Second),
			Tool:   sms.ToolSend,
			Args: func(i int) json.RawMessage {
				return json.RawMessage(fmt.Sprintf(`{"to":"+1555010%04d","body":"code %d"}`, i, i))
			},
			Effects: fake.SentFor,
			Inject: func(kind string) {
				switch kind {
				case vendortest.FailRetryable:
					fake.Inject(fakesms.Fault429)
				case vendortest.FailPermanent:
					fake.Inject(fakesms.FaultReject)
				case vendortest.FailUnknownAfterEffect:
					fake.Inject(fakesms.FaultDropAfterSend)
				}
			},
			Expire: fake.ForgetKeys,
		}
	}})
}
