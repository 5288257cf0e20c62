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
// The dispatch worker commits the op as dispatching, with a fresh attempt token, before it
// calls the vendor, and records the vendor's answer only where the token still matches,
// in the same transaction that completes the River job. Vendors are adapters that satisfy
// the Vendor interface declared here; every vendor error falls into one of three outcome
// classes (retryable and provably not executed, permanent, or outcome unknown).
//
// One unknown outcome is resent: a request that went out unanswered (a timeout or a lost
// connection, DispatchError.Unanswered) to a vendor that deduplicates keys, while it
// still remembers the key. The op goes back to pending with a resend deadline (the end
// of the key window, less a minute); a run that comes after it, or that runs out of
// attempts, hands the op to the reconciler instead, since the first request may have
// been carried out.
package outbox
