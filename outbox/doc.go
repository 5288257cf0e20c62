// Package outbox is oncebox's domain: ops, idempotency keys, payload fingerprints, the
// states an op moves through, the transactional enqueue, and the River worker that
// dispatches an op to its vendor once.
//
// An op is written with its River job in one transaction (EnqueueTx inside the caller's
// own pgx transaction, or Enqueue in one of its own). The same key with the same payload
// returns the stored op; the same key with another payload is refused with
// ErrKeyConflict and never executed. A call is validated and fingerprinted once, by
// Prepare, whichever door it came in by; EnqueuePrepared records it. A new op (never a
// replay) is put to the Config's Gate once, in the enqueue's transaction: it runs, waits
// for a person's approval, or is refused (package governance is the Gate of approval
// rules, budgets and tenant policies; this package keeps the op's lifecycle: its
// status, its approval row, its decision and expiry, its jobs).
//
// A clean run (no earlier run of the op may have called the vendor without its answer
// being recorded) calls the vendor without a claim commit: River's fetch of the job is
// the durable marker, and the answer is recorded fenced by the job's (id, attempt) in the
// transaction that completes the River job. A run that is not clean, or every run with
// Config.ClaimCommit, first commits the op as dispatching with a fresh attempt token and
// records the answer only where the token still matches. Vendors are adapters that
// satisfy the Vendor interface of package vendorapi; every vendor error falls into one of three outcome
// classes (retryable and provably not executed, permanent, or outcome unknown).
//
// One unknown outcome is resent: a request that went out unanswered (a timeout or a lost
// connection, DispatchError.Unanswered) to a vendor that deduplicates keys, while it
// still remembers the key. The op goes back to pending with a resend deadline (the end
// of the key window, less a minute); a run that comes after it, or that runs out of
// attempts, hands the op to the reconciler instead, since the first request may have
// been carried out.
//
// # The sweeper
//
// The Outbox owns every job that moves an op, the sweeper included: Config.Sweep
// configures it, and with Sweep.Periodic the Outbox runs it every Sweep.Interval as a
// River periodic job on MaintenanceQueue from Start to Stop; SweepOnce runs one pass on
// demand. A sweep first moves ops stuck in dispatching (started longer ago than their
// vendor's job timeout plus Sweep.StuckMargin, with no dispatch job running) to unknown,
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
//     old one (Sweep.ResendOnNone false sends it to needs_review instead);
//   - none, within the lag: checked again once the lag is over;
//   - two or more: needs_review, logged as an error and counted as a duplicate;
//   - the vendor cannot be asked (ErrLookupUnavailable): needs_review;
//   - any other lookup error: checked again after Sweep.RetryLookupAfter.
//
// Every decision is an oncebox_op_event of kind "reconcile" by actor "reconciler",
// whose detail names the decision (the Sweep* decision constants) and what the vendor
// answered. A dispatch run that hands an op over after a takeover inserts a sweep at
// once, in its own transaction, when the sweep runs periodically in the process.
//
// # Review
//
// ListReview lists the ops in needs_review; ResolveSucceeded, ResolveFailed and
// ReleaseForResend record a person's decision with their name and reason.
package outbox
