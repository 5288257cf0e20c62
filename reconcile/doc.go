// Package reconcile is the reconciler: it settles ops whose outcome is unknown from the
// vendor's own records. A round of it is a sweep (Reconciler.Sweep, SweepArgs).
//
// The Outbox owns every job that moves an op, the reconciler included: outbox.New builds
// it with New, handing it its Config (outbox.Config.Reconcile) and a Deps struct with
// what it uses of the Outbox (the pool, the op state machine, the vendors, their job
// timeouts, the tenants' vendor accounts, the tools' redaction, the logger). With
// Config.Periodic the Outbox runs it every Config.Interval as a River periodic job on
// MaintenanceQueue from Start to Stop; outbox.Outbox.ReconcileOnce runs one sweep on
// demand. A sweep first moves ops stuck in dispatching (started longer ago than their
// vendor's job timeout plus Config.StuckMargin, with no dispatch job running) to unknown,
// and gives pending ops whose dispatch job is gone a new one. Then, for each unknown op
// that is due, it asks the vendor for the objects tagged with the op's id, holding no
// lock during the call, and records one decision in a transaction that locks the op and
// checks that it is still unknown with the same attempt token (otherwise a worker or a
// person got there first and the decision is dropped):
//
//   - exactly one object: the op succeeded with it (or failed, when the object records
//     a refusal such as a declined payment);
//   - none, once the vendor's lookup lag has passed since the latest attempt ended:
//     the op goes back to pending with its dispatch job, under the same vendor key, or
//     under the next generation's key when the vendor replays a stored failure for the
//     old one (Config.ResendOnNone false sends it to needs_review instead);
//   - none, within the lag: checked again once the lag is over;
//   - two or more: needs_review, logged as an error and counted as a duplicate;
//   - the vendor cannot be asked (vendorapi.ErrLookupUnavailable): needs_review;
//   - any other lookup error: checked again after Config.RetryLookupAfter.
//
// Every decision is an oncebox_op_event of kind "reconcile" by actor "reconciler",
// whose detail names the decision (the decision constants: Succeeded, Resend, ...) and
// what the vendor answered. A dispatch run that hands an op over after a takeover
// inserts a sweep at once, in its own transaction (HandOverTx), when the sweep runs
// periodically in the process.
//
// The package does not import outbox: what it needs of it comes in Deps, through small
// interfaces (Tools, Accounts) that outbox's types satisfy.
package reconcile
