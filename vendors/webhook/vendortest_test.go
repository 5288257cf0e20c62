package webhook_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendors/webhook"
	"github.com/oncebox/oncebox/vendortest"
)

// conformanceLag is the lookup lag the adapter reports when the suite controls
// the fake's lag (the serve default of --webhook-lookup-lag).
const conformanceLag = 5 * time.Second

// TestVendorConformance runs the shared vendor suite against the adapter with
// a receiver that honours Idempotency-Key, one that does not (both with the
// fake's key window and lookup lag under the suite's control), and one whose
// lookups lag by a fixed amount the suite waits out.
func TestVendorConformance(t *testing.T) {
	t.Parallel()
	vendortest.Run(t, vendortest.Harness{Name: "native", New: func(tb testing.TB) *vendortest.Instance {
		return newConformanceInstance(tb, true, 0, true)
	}})
	vendortest.Run(t, vendortest.Harness{Name: "not_native", New: func(tb testing.TB) *vendortest.Instance {
		return newConformanceInstance(tb, false, 0, true)
	}})
	vendortest.Run(t, vendortest.Harness{Name: "lagged", New: func(tb testing.TB) *vendortest.Instance {
		return newConformanceInstance(tb, true, 300*time.Millisecond, false)
	}})
}

// newConformanceInstance returns a Vendor pointed at a fresh fake receiver
// whose keys are honoured when native, and whose lookups lag by lag. With
// hooks, the suite may expire the fake's keys and change its lag, and the
// Vendor reports conformanceLag as its LookupLag; without, it reports lag.
func newConformanceInstance(tb testing.TB, native bool, lag time.Duration, hooks bool) *vendortest.Instance {
	fake := fakewebhook.New(fakewebhook.Config{HonourKeys: native, LookupLag: lag, HangFor: time.Second})
	vendorLag := lag
	if hooks {
		vendorLag = conformanceLag
	}
	srv := httptest.NewServer(fake)
	tb.Cleanup(func() {
		fake.ReleaseHangs()
		srv.Close()
	})
	v, err := webhook.New(webhook.Config{
		Targets: map[string]webhook.Target{
			"hooks": {BaseURL: srv.URL, SecretHeader: secretHeader, Secret: secret},
		},
		Timeout:           2 * time.Second,
		NativeIdempotency: native,
		LookupPath:        "/_lookup",
		LookupLag:         vendorLag,
	})
	require.NoError(tb, err)

	inst := &vendortest.Instance{
		Vendor: v,
		Tool:   protocol.ToolWebhookPost,
		Args: func(i int) json.RawMessage {
			return json.RawMessage(fmt.Sprintf(`{"target":"hooks","path":"/orders","body":{"order":%d}}`, i))
		},
		Effects: func(opID string) int { return len(fake.EffectsFor(opID)) },
		Inject: func(kind string) {
			switch kind {
			case vendortest.FailRetryable:
				fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault429, RetryAfter: time.Second})
			case vendortest.FailPermanent:
				fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultReject, Status: 422})
			case vendortest.FailUnknownAfterEffect:
				fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect})
			default:
				tb.Fatalf("unknown failure kind %q", kind)
			}
		},
		Secrets: []string{secret},
	}
	if hooks {
		inst.Expire = fake.ExpireIdempotencyKeys
		inst.SetLookupLag = fake.SetLookupLag
	}
	return inst
}
