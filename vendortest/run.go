package vendortest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/vendorapi"
)

// callTimeout bounds every call the suite makes to the vendor.
const callTimeout = 15 * time.Second

// longLag is the fake's lag in the LookupLag subtest: far longer than the test.
const longLag = time.Hour

// Run runs the conformance suite against the harness, as parallel subtests of
// a subtest named h.Name.
func Run(t *testing.T, h Harness) {
	t.Helper()
	require.NotEmpty(t, h.Name, "vendortest: Harness.Name is empty")
	require.NotNil(t, h.New, "vendortest: Harness.New is nil")
	t.Run(h.Name, func(t *testing.T) {
		t.Parallel()
		for _, st := range []struct {
			name string
			run  func(*testing.T, Harness)
		}{
			{"Dispatch", testDispatch},
			{"DispatchTwice", testDispatchTwice},
			{"ExpiredKey", testExpiredKey},
			{"FailureRetryable", testFailureRetryable},
			{"FailurePermanent", testFailurePermanent},
			{"FailureUnknownAfterEffect", testFailureUnknownAfterEffect},
			{"Lookup", testLookup},
			{"LookupLag", testLookupLag},
			{"ContextCancelled", testContextCancelled},
			{"Idempotency", testIdempotency},
		} {
			t.Run(st.name, func(t *testing.T) {
				t.Parallel()
				st.run(t, h)
			})
		}
	})
}

// newInstance asks the harness for an Instance and checks it is complete.
func newInstance(t *testing.T, h Harness) *Instance {
	t.Helper()
	inst := h.New(t)
	require.NotNil(t, inst, "Harness.New returned nil")
	require.NotNil(t, inst.Vendor, "Instance.Vendor is nil")
	require.NotEmpty(t, inst.Tool, "Instance.Tool is empty")
	require.NotNil(t, inst.Args, "Instance.Args is nil")
	require.NotNil(t, inst.Effects, "Instance.Effects is nil")
	require.NotNil(t, inst.Inject, "Instance.Inject is nil")
	return inst
}

// newParams returns the DispatchParams of a new op with args i, under a fresh
// op id and the vendor key the outbox would derive for it.
func newParams(inst *Instance, i int) vendorapi.DispatchParams {
	opID := "op_" + strings.ToLower(rand.Text())
	return vendorapi.DispatchParams{
		OpID:      opID,
		TenantID:  1,
		Tool:      inst.Tool,
		Args:      inst.Args(i),
		VendorKey: vendorapi.VendorKey(1, "conformance-"+opID, inst.Tool, 0),
		Attempt:   1,
	}
}

// dispatch calls Vendor.Dispatch under the suite's timeout.
func dispatch(t *testing.T, inst *Instance, p vendorapi.DispatchParams) (*vendorapi.DispatchResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	return inst.Vendor.Dispatch(ctx, p)
}

// requireDispatched dispatches p, requires a success and checks its result.
func requireDispatched(t *testing.T, inst *Instance, p vendorapi.DispatchParams) *vendorapi.DispatchResult {
	t.Helper()
	res, err := dispatch(t, inst, p)
	require.NoError(t, err, "dispatch of op %s", p.OpID)
	require.NotNil(t, res, "dispatch of op %s returned neither a result nor an error", p.OpID)
	require.NotEmpty(t, res.VendorRef, "a success must name the vendor's object")
	require.True(t, json.Valid(res.Result), "Result must be JSON: %q", res.Result)
	requireNoSecrets(t, inst, string(res.Result), res.VendorRef)
	return res
}

// requireFailure requires err to be a *vendorapi.DispatchError of class outcome,
// free of secrets, and returns it.
func requireFailure(t *testing.T, inst *Instance, res *vendorapi.DispatchResult, err error, outcome vendorapi.Outcome) *vendorapi.DispatchError {
	t.Helper()
	require.Nil(t, res, "a failed dispatch must return no result")
	require.Error(t, err, "the dispatch should have failed as %s", outcome)
	var de *vendorapi.DispatchError
	require.Truef(t, errors.As(err, &de), "error %T %q is not a *vendorapi.DispatchError: the outbox would take it as unknown", err, err)
	require.Equalf(t, outcome, de.Outcome, "outcome of %q", de.Error())
	requireNoSecrets(t, inst, err.Error(), de.Message, string(de.Body))
	return de
}

// requireNoSecrets requires that none of texts holds one of the instance's
// secrets.
func requireNoSecrets(t *testing.T, inst *Instance, texts ...string) {
	t.Helper()
	for _, secret := range inst.Secrets {
		if secret == "" {
			continue
		}
		for _, s := range texts {
			require.NotContains(t, s, secret, "a secret leaked")
		}
	}
}

// lookup calls Vendor.Lookup for the op of p under the suite's timeout.
func lookup(t *testing.T, inst *Instance, p vendorapi.DispatchParams, vendorRef string, since time.Time) []vendorapi.VendorObject {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := inst.Vendor.Lookup(ctx, vendorapi.LookupParams{
		OpID: p.OpID, TenantID: p.TenantID, Tool: p.Tool, Args: p.Args, VendorRef: vendorRef, Since: since,
	})
	require.NoError(t, err, "lookup of op %s", p.OpID)
	require.NotNil(t, res, "lookup of op %s returned neither a result nor an error", p.OpID)
	return res.Objects
}

// requireFound requires objs to be exactly the object ref tagged with opID.
func requireFound(t *testing.T, objs []vendorapi.VendorObject, opID, ref string) {
	t.Helper()
	require.Len(t, objs, 1, "lookup must find exactly the one object dispatched for op %s", opID)
	require.Equal(t, opID, objs[0].OpID, "the object's tag")
	require.Equal(t, ref, objs[0].ID, "the object found must be the one Dispatch named in VendorRef")
}

func testDispatch(t *testing.T, h Harness) {
	inst := newInstance(t, h)
	require.NotEmpty(t, inst.Vendor.Name(), "Vendor.Name")
	p := newParams(inst, 1)
	other := newParams(inst, 2)
	requireDispatched(t, inst, p)
	require.Equal(t, 1, inst.Effects(p.OpID), "the fake must have recorded exactly one effect tagged with the op")
	require.Zero(t, inst.Effects(other.OpID), "Effects must count by op id")
}

func testDispatchTwice(t *testing.T, h Harness) {
	inst := newInstance(t, h)
	p := newParams(inst, 1)
	first := requireDispatched(t, inst, p)
	second := requireDispatched(t, inst, p)
	if inst.Vendor.Idempotency().Native {
		require.Equal(t, 1, inst.Effects(p.OpID), "a vendor with native idempotency must not act twice on one vendor key")
		require.Equal(t, first.VendorRef, second.VendorRef, "a replay must name the same object")
		return
	}
	// Without native idempotency a resend is another side effect: this is why
	// the outbox reconciles an unknown outcome instead of resending it.
	require.Equal(t, 2, inst.Effects(p.OpID), "a vendor without native idempotency acts on every send")
	require.NotEqual(t, first.VendorRef, second.VendorRef, "two sends make two objects")
}

func testExpiredKey(t *testing.T, h Harness) {
	inst := newInstance(t, h)
	if !inst.Vendor.Idempotency().Native {
		t.Skip("the vendor has no native idempotency keys to expire")
	}
	if inst.Expire == nil {
		t.Skip("the harness's fake cannot forget its idempotency keys (Instance.Expire is nil)")
	}
	p := newParams(inst, 1)
	first := requireDispatched(t, inst, p)
	inst.Expire()
	second := requireDispatched(t, inst, p)
	// Past the window the key protects nothing: a resend acts again. This is
	// why Idempotency().Window must be honest.
	require.Equal(t, 2, inst.Effects(p.OpID), "once the vendor forgot the key, the same params act again")
	require.NotEqual(t, first.VendorRef, second.VendorRef)
}

func testFailureRetryable(t *testing.T, h Harness) {
	inst := newInstance(t, h)
	p := newParams(inst, 1)
	inst.Inject(FailRetryable)
	res, err := dispatch(t, inst, p)
	requireFailure(t, inst, res, err, vendorapi.OutcomeRetryable)
	require.Zero(t, inst.Effects(p.OpID), "retryable must mean the vendor provably did not act")

	// The outbox then sends again with the same key: that is the only effect.
	requireDispatched(t, inst, p)
	require.Equal(t, 1, inst.Effects(p.OpID), "the resend after a retryable failure is the op's one effect")
}

func testFailurePermanent(t *testing.T, h Harness) {
	inst := newInstance(t, h)
	p := newParams(inst, 1)
	inst.Inject(FailPermanent)
	res, err := dispatch(t, inst, p)
	de := requireFailure(t, inst, res, err, vendorapi.OutcomePermanent)
	if len(de.Body) > 0 {
		require.True(t, json.Valid(de.Body), "a permanent failure's Body is stored and replayed as JSON: %q", de.Body)
	}
	require.Zero(t, inst.Effects(p.OpID), "the refused op must not have been executed")
}

func testFailureUnknownAfterEffect(t *testing.T, h Harness) {
	inst := newInstance(t, h)
	p := newParams(inst, 1)
	inst.Inject(FailUnknownAfterEffect)
	res, err := dispatch(t, inst, p)
	requireFailure(t, inst, res, err, vendorapi.OutcomeUnknown)
	require.Equal(t, 1, inst.Effects(p.OpID), "the fake acted before the answer was lost")

	if inst.Vendor.Idempotency().Native {
		// Inside the key's window a resend with the same key is a lookup: it
		// answers with the stored object and acts no more.
		requireDispatched(t, inst, p)
		require.Equal(t, 1, inst.Effects(p.OpID), "a resend under the same key must not act again")
	}
}

func testLookup(t *testing.T, h Harness) {
	inst := newInstance(t, h)
	since := time.Now().Add(-time.Minute)

	never := newParams(inst, 2)
	require.Empty(t, lookup(t, inst, never, "", since), "an op never dispatched has no object")

	if inst.SetLookupLag != nil {
		inst.SetLookupLag(0)
	}
	p := newParams(inst, 1)
	res := requireDispatched(t, inst, p)
	sent := time.Now()
	if inst.SetLookupLag == nil {
		lag := inst.Vendor.LookupLag()
		require.LessOrEqualf(t, lag, MaxWaitedLookupLag,
			"the harness has no SetLookupLag and the vendor reports a LookupLag of %s: give the harness a SetLookupLag or a shorter lag", lag)
		if objs := lookup(t, inst, p, res.VendorRef, since); len(objs) == 0 {
			require.Positive(t, lag, "Lookup missed a fresh object, so LookupLag must not claim that lookups are immediate")
		} else {
			requireFound(t, objs, p.OpID, res.VendorRef)
		}
		// Only a "none found" older than LookupLag can be trusted: once it has
		// passed, the object must show.
		time.Sleep(time.Until(sent.Add(lag)))
	}
	requireFound(t, lookup(t, inst, p, res.VendorRef, since), p.OpID, res.VendorRef)
	require.Equal(t, 1, inst.Effects(p.OpID))
	require.Empty(t, lookup(t, inst, never, "", since), "another op's object must not be found for an op never dispatched")
}

func testLookupLag(t *testing.T, h Harness) {
	inst := newInstance(t, h)
	if inst.SetLookupLag == nil {
		t.Skip("the harness's fake has no adjustable lag; Lookup checks LookupLag against an immediate lookup instead")
	}
	inst.SetLookupLag(longLag)
	since := time.Now().Add(-time.Minute)
	p := newParams(inst, 1)
	res := requireDispatched(t, inst, p)
	objs := lookup(t, inst, p, res.VendorRef, since)
	lag := inst.Vendor.LookupLag()
	if inst.LookupScansUnlaggedLists {
		requireFound(t, objs, p.OpID, res.VendorRef)
		require.LessOrEqual(t, lag, smallLookupLag, "a lookup that reads unlagged lists should report a small lag")
		return
	}
	require.Empty(t, objs, "the fake hides the object for %s", longLag)
	require.Positive(t, lag, "Lookup missed a fresh object, so LookupLag must not claim that lookups are immediate")
}

func testContextCancelled(t *testing.T, h Harness) {
	inst := newInstance(t, h)
	p := newParams(inst, 1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := inst.Vendor.Dispatch(ctx, p)
	requireFailure(t, inst, res, err, vendorapi.OutcomeRetryable)
	require.Zero(t, inst.Effects(p.OpID), "nothing may be sent under a cancelled context")
}

func testIdempotency(t *testing.T, h Harness) {
	inst := newInstance(t, h)
	idem := inst.Vendor.Idempotency()
	if idem.Native {
		require.Positive(t, idem.Window, "a vendor that deduplicates by key must say for how long")
	}
	require.False(t, idem.Window < 0, "Idempotency().Window must not be negative")
	require.GreaterOrEqual(t, inst.Vendor.LookupLag(), time.Duration(0), "LookupLag must not be negative")
}
