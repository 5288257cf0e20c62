package dispatch

import (
	"time"

	"github.com/oncebox/oncebox/protocol"
)

// claimFound is what a claim's locking read found of the op: all that decides what the
// claiming job does with it.
type claimFound struct {
	// status is the op's status.
	status protocol.Status
	// resendPassed is set when the op's resend_before is over: an earlier request under
	// its vendor key may have been carried out, and the key may no longer be resent.
	resendPassed bool
	// clean is set when no earlier run of the op may have called the vendor without its
	// answer being recorded (opstate.CleanRunSQL).
	clean bool
	// mayRunSecs is how long, in seconds, the op's latest attempt may still be running
	// (0 or less: it is over).
	mayRunSecs float64
}

// claimStep is what the claiming job does with the op it locked.
type claimStep int

const (
	// claimComplete: the job has nothing (more) to do; it completes.
	claimComplete claimStep = iota
	// claimSnooze: the op's latest attempt may still be running; the job looks again
	// once it must be over, leaving the op and the attempt as they are.
	claimSnooze
	// claimHandOver: the op may not be sent; it goes to the reconciler (unknown).
	claimHandOver
	// claimMarkUnheard: an earlier run may have called the vendor unheard; the job marks
	// that run, then sends only inside the vendor key's window (claimPlan.window).
	claimMarkUnheard
	// claimCloseLost: the run that claimed the op died mid-call; the job closes its
	// attempts, then sends only inside the vendor key's window (claimPlan.window).
	claimCloseLost
	// claimSend: the job claims the op and calls the vendor.
	claimSend
)

// Event kinds of an op the claiming job hands to the reconciler.
const (
	kindResendWindowPassed = "resend_window_passed"
	kindPredecessorUnheard = "predecessor_unheard"
	kindPredecessorLost    = "predecessor_lost"
)

// claimPlan is how a run claims the op it locked: what planClaim decides the claiming
// job does with it, carried out by claimLocked.
type claimPlan struct {
	step claimStep
	// snooze is how long a claimSnooze job waits.
	snooze time.Duration
	// kind and reason are the event that hands the op to the reconciler: now
	// (claimHandOver), or once the key window proves closed (claimMarkUnheard,
	// claimCloseLost).
	kind, reason string
	// insideWindow, for claimSend, is set when a predecessor's request may have been
	// carried out: this resend, and any later one, must stay inside the key window.
	insideWindow bool
}

// planClaim decides, from what the claim's locking read found, how the claiming job
// claims the op: complete, snooze, hand it over, or send (after marking or closing an
// earlier run). It does no I/O: claimLocked carries the plan out.
func planClaim(f claimFound) claimPlan {
	switch f.status {
	case protocol.StatusPending:
		if f.resendPassed {
			// An earlier request under this key may have been carried out, and the
			// vendor no longer deduplicates the key: a resend could do it twice.
			return claimPlan{step: claimHandOver, kind: kindResendWindowPassed,
				reason: "an earlier request may have been carried out and the vendor's key window is over; the reconciler decides"}
		}
		if !f.clean {
			// An earlier run may have called the vendor without its answer being
			// recorded (it was killed, or failed to record): the op may have been
			// sent. That run is over: River reran its job only after it returned, after
			// RescueStuckJobsAfter, which exceeds its job timeout, or once its process
			// was proven gone (liveness); or its job is gone. As for a predecessor found
			// dispatching, only a resend inside the vendor's key window (from the op's
			// creation at the latest) is safe.
			return claimPlan{step: claimMarkUnheard, kind: kindPredecessorUnheard,
				reason: "an earlier run may have called the vendor without its answer being recorded, and the vendor's idempotency window is over or absent; the reconciler decides"}
		}
		return claimPlan{step: claimSend}
	case protocol.StatusDispatching:
		// The job that claimed it died mid-call (or is a rescued duplicate that may
		// still run). Inside the vendor's native key window a resend with the same
		// key is itself the lookup; otherwise only the reconciler may decide.
		if f.mayRunSecs > 0 {
			// The attempt may still be running (its job's timeout is not over and its
			// process is not provably gone): it is not lost, and its request may still
			// be on its way. Look again once it must be over.
			return claimPlan{step: claimSnooze, snooze: time.Duration(f.mayRunSecs*float64(time.Second)) + takeoverMargin}
		}
		return claimPlan{step: claimCloseLost, kind: kindPredecessorLost,
			reason: "found dispatching outside the vendor's idempotency window; the reconciler decides"}
	default:
		// Settled, unknown (the reconciler owns it), or awaiting approval: this job has
		// nothing to do.
		return claimPlan{step: claimComplete}
	}
}

// window is the plan of a claimMarkUnheard or claimCloseLost once the job knows
// whether the vendor key's window is open: send inside it (and stay inside it), hand
// the op to the reconciler otherwise.
func (p claimPlan) window(open bool) claimPlan {
	if open {
		return claimPlan{step: claimSend, insideWindow: true}
	}
	return claimPlan{step: claimHandOver, kind: p.kind, reason: p.reason}
}
