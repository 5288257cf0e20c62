package vendortest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/oncebox/oncebox/vendorapi"
)

// The failure classes a harness's Instance.Inject must be able to make its fake
// answer with.
const (
	// FailRetryable is a failure before the vendor acted, such as a 429: the op
	// was not executed.
	FailRetryable = "retryable"
	// FailPermanent is a refusal, such as a 400: the op was not executed and
	// never will be with these args.
	FailPermanent = "permanent"
	// FailUnknownAfterEffect is a failure after the vendor acted whose answer
	// was lost, such as a connection dropped after the object was created.
	FailUnknownAfterEffect = "unknown_after_effect"
)

// Harness is what an adapter's test provides to the suite.
type Harness struct {
	// Name names the harness in the subtests' names, such as "stripe" or
	// "webhook/native".
	Name string
	// New returns a fresh vendor pointed at a fresh fake. It registers every
	// cleanup (servers, hung requests, idle connections) with tb.Cleanup. It is
	// called once per subtest, from parallel subtests.
	New func(tb testing.TB) *Instance
}

// Instance is one vendor adapter pointed at one fake, with the handles the
// suite needs to drive the fake and read its records.
type Instance struct {
	// Vendor is the adapter under test. Its timeouts should be short (a few
	// seconds), so that a failing subtest fails fast.
	Vendor vendorapi.Vendor
	// Tool is the tool to dispatch, such as tools.PaymentIntent.
	Tool string
	// Args returns valid args for Tool, distinct for each i.
	Args func(i int) json.RawMessage
	// Effects counts the side effects the fake recorded for an op id, from the
	// fake's own records (the objects tagged with the op, the emails whose
	// custom_args carry it, the requests whose Oncebox-Op header was it).
	Effects func(opID string) int
	// Inject makes the fake answer the next dispatch with a failure of the
	// given class: FailRetryable, FailPermanent or FailUnknownAfterEffect.
	Inject func(kind string)
	// Expire, when not nil, makes the fake forget its idempotency keys, as
	// Stripe does once its 24 hour window has passed.
	Expire func()
	// SetLookupLag, when not nil, changes how long the fake hides new objects
	// from lookups. Nil when the fake's lag cannot be changed; the suite then
	// waits out Vendor.LookupLag(), which must be at most MaxWaitedLookupLag.
	SetLookupLag func(d time.Duration)
	// LookupScansUnlaggedLists is true when Lookup also reads a source the
	// fake's lag does not apply to (Stripe's list scan besides its lagged
	// search): a fresh object is then found even under a long lag, and
	// LookupLag must be small.
	LookupScansUnlaggedLists bool
	// Secrets are strings that must never appear in a result, an error or an
	// error body, such as the API key. Optional.
	Secrets []string
}

// MaxWaitedLookupLag is the longest Vendor.LookupLag() the suite waits out
// when the harness has no SetLookupLag.
const MaxWaitedLookupLag = 5 * time.Second

// smallLookupLag is the most LookupLag may report when LookupScansUnlaggedLists.
const smallLookupLag = time.Minute
