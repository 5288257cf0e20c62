// Package outbox is oncebox's domain: ops, idempotency keys, payload fingerprints, the
// states an op moves through, the transactional enqueue, and the River client whose
// workers dispatch an op to its vendor once (package dispatch).
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
// # Dispatch
//
// The dispatch worker lives in package dispatch; the Outbox builds it with the
// dependencies it needs (dispatch.Deps), configures it from Config (Queues,
// ClaimCommit, MixedVersions, BatchedCompletion, MaxAttempts, RetryBackoff, ClientID) and
// runs it on its River client from Start to Stop. A clean run (no earlier run of the op
// may have called the vendor without its answer being recorded) calls the vendor
// without a claim commit: River's fetch of the job is
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
// # The reconciler
//
// The reconciler, which settles ops whose outcome is unknown from the vendor's own
// records, lives in package reconcile. The Outbox builds it with the dependencies it
// needs (reconcile.Deps), configures it with Config.Reconcile, runs its sweep as a River
// periodic job when Reconcile.Periodic is set, and runs one sweep on demand with
// ReconcileOnce.
//
// # Review
//
// ListReview lists the ops in needs_review; ResolveSucceeded, ResolveFailed and
// ReleaseForResend record a person's decision with their name and reason.
package outbox
