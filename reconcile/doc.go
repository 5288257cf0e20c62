// Package reconcile resolves ops whose outcome is unknown from the vendor's own
// records, hands what it cannot resolve to a person, and compares the outbox with the
// vendors for finance.
//
// # The sweeper
//
// A Reconciler sweeps periodically (a River periodic job on QueueName) or on demand
// (SweepOnce). A sweep first moves ops stuck in dispatching (started longer ago than
// their vendor's job timeout plus Config.StuckMargin, with no dispatch job running) to
// unknown. Then, for each unknown op that is due, it asks the vendor for the objects
// tagged with the op's id, holding no lock during the call, and records one decision
// in a transaction that locks the op and checks that it is still unknown with the same
// attempt token (otherwise a worker or a person got there first and the decision is
// dropped):
//
//   - exactly one object: the op succeeded with it (or failed, when the object records
//     a refusal such as a declined payment);
//   - none, once the vendor's lookup lag has passed since the latest attempt ended:
//     the op goes back to pending with its dispatch job, under the same vendor key, or
//     under the next generation's key when the vendor replays a stored failure for the
//     old one (Config.ResendOnNone false sends it to needs_review instead);
//   - none, within the lag: checked again once the lag is over;
//   - two or more: needs_review, logged as an error and counted as a duplicate;
//   - the vendor cannot be asked (outbox.ErrLookupUnavailable): needs_review;
//   - any other lookup error: checked again after Config.RetryLookupAfter.
//
// Every decision is an oncebox_op_event of kind "reconcile" by actor "reconciler",
// whose detail names the decision (the Decision constants) and what the vendor
// answered.
//
// # Wiring
//
// outbox.New takes the sweeper's worker and periodic job, but the sweeper needs the
// Outbox. Build the Reconciler first with a nil Config.Outbox, pass Register as
// outbox.Config.ExtraWorkers, PeriodicJob in outbox.Config.PeriodicJobs and QueueName in
// ExtraQueues, then call SetOutbox before starting the Outbox. See the example.
//
// # Review
//
// ListReview lists the ops in needs_review; ResolveSucceeded, ResolveFailed and
// ReleaseForResend record a person's decision with their name and reason.
//
// # Finance report
//
// BuildReport compares the ops created in a window with the objects each vendor's
// Lister returns, line by line (matched, missing_at_vendor, orphan_at_vendor,
// duplicate, mismatch, and unchecked for an op whose vendor has no Lister), with
// totals of the matched amounts per tool and currency; it writes itself as CSV or
// JSON. A report is clean only when every line matched.
package reconcile
