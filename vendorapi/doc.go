// Package vendorapi is the vendor contract of oncebox: what a vendor adapter
// implements (Vendor, its optional Throttler) and the types it exchanges with the
// outbox (DispatchParams, DispatchResult, DispatchError and its outcome classes,
// LookupParams, LookupResult, VendorObject), the vendor key an op is sent under
// (VendorKey), the vendor account an op acts on (Account, WithAccount, AccountFrom),
// and what describes a tool (Tool, ObjectArg, Step, ValidationError).
//
// It imports only the standard library, like River's rivertype: an adapter
// (vendors/*, examples/custom-vendor), the built-in tools' argument decoders (tools)
// and the conformance suite (vendortest) build on it without linking pgx or River.
// TestStandardLibraryOnly keeps it so.
package vendorapi
