// Package vendortest is the conformance suite every vendor adapter runs, oncebox's
// and those written outside oncebox (see examples/custom-vendor): one set
// of subtests, written once against vendorapi.Vendor, that checks what the outbox
// relies on whatever the vendor (River's driver test suite is the model).
//
// An adapter's test package describes its adapter and fake in a Harness and
// calls Run:
//
//	func TestVendorConformance(t *testing.T) {
//		t.Parallel()
//		vendortest.Run(t, vendortest.Harness{
//			Name: "stripe",
//			New: func(tb testing.TB) *vendortest.Instance {
//				fake := fakestripe.New(fakestripe.Config{})
//				srv := httptest.NewServer(fake)
//				tb.Cleanup(srv.Close)
//				v, err := stripe.New(stripe.Config{APIKey: "sk_test_x", BaseURL: srv.URL})
//				require.NoError(tb, err)
//				return &vendortest.Instance{Vendor: v, Tool: tools.PaymentIntent, ...}
//			},
//		})
//	}
//
// Every subtest asks the harness for a fresh Instance (a vendor pointed at a
// fresh fake) and asserts on the fake's own records through Instance.Effects,
// never on what the adapter says about itself alone. The subtests are:
//
//   - Dispatch: a success carries a VendorRef and a JSON Result free of
//     secrets, and the fake recorded exactly one effect tagged with the op.
//   - DispatchTwice: the same DispatchParams twice make one effect and the same
//     VendorRef when the vendor deduplicates natively, and two effects when it
//     does not, which is why the outbox never resends without reconciling.
//   - ExpiredKey: once the fake forgets its keys, the same params act again
//     (only with Instance.Expire).
//   - FailureRetryable, FailurePermanent, FailureUnknownAfterEffect: each
//     failure class injected into the fake comes back as an
//     *vendorapi.DispatchError of that class with the matching count of effects.
//   - Lookup and LookupLag: Lookup finds exactly the dispatched object once the
//     lag has passed, nothing for an op never sent, and LookupLag reports a lag
//     whenever Lookup can miss a fresh object.
//   - ContextCancelled: a dispatch whose context is already done sends nothing
//     and is retryable.
//   - Idempotency: native idempotency comes with a window.
//
// # A test kit, and why it is public
//
// A vendor adapter written in another module cannot import oncebox's internal
// packages, and this suite is what proves that an adapter keeps the contract the
// outbox relies on. So it is public, a test kit like the fake vendors, and its
// exported names follow the same compatibility rules as the rest of oncebox. It
// imports testify's require: import it from tests only.
package vendortest
