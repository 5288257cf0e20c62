package dispatch

import (
	"time"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// answer is what a dispatch learned, and what the op's claim knew before it: all that
// decides the op's next status.
type answer struct {
	// res is the vendor's yes, when err is nil.
	res *vendorapi.DispatchResult
	// err is the vendor's refusal or failure, classified by Classify.
	err error
	// claimResendBefore is set when an earlier request under the op's vendor key may
	// have been carried out unheard.
	claimResendBefore *time.Time
	// windowEnd is until when the op's vendor key may be resent (the vendor's window
	// less keyResendMargin), and windowOpen whether that is still ahead.
	windowEnd  time.Time
	windowOpen bool
	// exhausted is set when this was the op's last attempt (Config.MaxAttempts, or the
	// River job's own limit).
	exhausted bool
}

// answerRecord is what to record of a vendor's answer: the op's next status and the
// attempt's outcome (record), what is counted and logged, and how the job goes on.
type answerRecord struct {
	record recordParams
	// observed is the outcome counted by Observer.Dispatched.
	observed string
	// bug is set when the vendor reports a bug in oncebox (the same vendor key sent with
	// other parameters): logged as an error.
	bug bool
	// retryAfter, for a record that keeps the job, is the vendor's Retry-After.
	retryAfter time.Duration
	// err is the classified error, for the job's error and the log.
	err *vendorapi.DispatchError
}

// recordOf decides what to record of a dispatch's answer: the op's next status, the
// attempt's outcome and what is counted. It does no I/O.
func recordOf(a answer) answerRecord {
	if a.err == nil {
		return answerRecord{observed: "succeeded", record: recordParams{status: protocol.StatusSucceeded, result: a.res.Result,
			vendorRef: a.res.VendorRef, outcome: "succeeded"}}
	}
	de := vendorapi.Classify(a.err)
	// maybeSent: a request under the current vendor key may have been carried out
	// without our hearing of it, now or in an earlier attempt. Such an op may only be
	// sent again while the vendor still deduplicates that key (resendBefore).
	unanswered := de.Outcome == vendorapi.OutcomeUnknown && de.Unanswered
	maybeSent := unanswered || a.claimResendBefore != nil
	if unanswered && a.windowOpen && !a.exhausted {
		// The request went out but no answer came back. The vendor deduplicates this
		// key and still remembers it, so sending it again is itself the lookup: it
		// replays the first request's answer, or runs it if it never arrived.
		de.Outcome = vendorapi.OutcomeRetryable
		de.Message += " (to be resent under the same key: the vendor deduplicates it)"
	}
	errJSON := dispatchErrorJSON(de)
	v := answerRecord{observed: de.Outcome.String(), err: de}
	if de.Outcome == vendorapi.OutcomeRetryable && a.exhausted && maybeSent {
		// Out of attempts with a request that may have been carried out: the
		// reconciler asks the vendor; a person is asked only if it cannot tell.
		v.observed = vendorapi.OutcomeUnknown.String()
		v.record = recordParams{status: protocol.StatusUnknown, errJSON: errJSON, outcome: "unknown",
			errText: "attempts exhausted after a request that may have been carried out: " + de.Error()}
		return v
	}
	switch de.Outcome {
	case vendorapi.OutcomePermanent:
		if de.Bug {
			v.bug = true
			v.record = recordParams{status: protocol.StatusNeedsReview, errJSON: errJSON, outcome: "permanent", errText: de.Error()}
			return v
		}
		v.record = recordParams{status: protocol.StatusFailed, errJSON: errJSON, outcome: "permanent", errText: de.Error()}
	case vendorapi.OutcomeRetryable:
		if a.exhausted {
			// Every request failed before the vendor acted (one that may have acted went
			// to the reconciler above).
			v.record = recordParams{status: protocol.StatusNeedsReview, errJSON: withNothingSent(errJSON), outcome: "retryable",
				errText: "attempts exhausted: " + de.Error()}
			return v
		}
		v.record = recordParams{status: protocol.StatusPending, errJSON: errJSON, outcome: "retryable", errText: de.Error(), keepJob: true}
		if unanswered {
			v.record.outcome = "unanswered"
		}
		if maybeSent {
			end := a.windowEnd
			v.record.resendBefore = &end
		}
		v.retryAfter = de.RetryAfter
	default:
		v.record = recordParams{status: protocol.StatusUnknown, errJSON: errJSON, outcome: "unknown", errText: de.Error(),
			staleKey: de.Replayed}
	}
	return v
}
