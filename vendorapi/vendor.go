package vendorapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// TagKey is the name under which every vendor object carries the id of its op (Stripe
// metadata, SendGrid custom_args), so it can be found again.
const TagKey = "oncebox_op"

// Vendor is what oncebox needs from a vendor adapter. Adapters live in vendors/<name> and
// return concrete types that satisfy it.
type Vendor interface {
	// Name is the vendor's name, used for queues, metrics and Tool.Vendor.
	Name() string
	// Dispatch performs the op's side effect once, sending params.VendorKey as the
	// vendor's idempotency key where it has one and params.OpID under TagKey. Every error
	// it returns should be a *DispatchError saying which outcome class it falls into; an
	// unclassified error is treated as OutcomeUnknown.
	Dispatch(ctx context.Context, params DispatchParams) (*DispatchResult, error)
	// Idempotency says whether and for how long the vendor honours idempotency keys.
	Idempotency() Idempotency
	// Lookup finds the vendor objects tagged with the op's id. It returns
	// ErrLookupUnavailable (wrapped) when the vendor cannot be asked.
	Lookup(ctx context.Context, params LookupParams) (*LookupResult, error)
	// LookupLag is how long after an object is created a Lookup may still miss it: only
	// a "none found" for an attempt older than this can be trusted.
	LookupLag() time.Duration
}

// Throttler is a Vendor that limits how fast its ops are sent (such as an upstream MCP
// server's rate limit). Before the worker claims an op of such a vendor it calls
// Throttle: 0 means the op may be sent now (the vendor has counted it against its
// limit), a positive duration snoozes the job that long with the op untouched: no
// attempt is counted, nothing is sent, and the op stays pending.
type Throttler interface {
	Throttle() time.Duration
}

// Idempotency describes a vendor's native idempotency keys.
type Idempotency struct {
	// Native is true when the vendor deduplicates requests carrying the same key.
	Native bool
	// Window is how long the vendor remembers a key (Stripe: 24 h).
	Window time.Duration
}

// DispatchParams is what a Vendor needs to perform an op.
type DispatchParams struct {
	OpID      string
	TenantID  int64
	Tool      string
	Args      json.RawMessage
	VendorKey string
	// Attempt counts dispatch attempts of this op, from 1.
	Attempt int
	// Definition is the tool definition stored with the op when it was accepted
	// (Tool.Definition), nil when the tool sets none.
	Definition json.RawMessage
	// Account is the vendor account the op was accepted under (Op.VendorAccount): the
	// zero Account for the installation's settings.
	Account Account
}

// DispatchResult is a vendor's yes.
type DispatchResult struct {
	// VendorRef identifies the vendor's object (a PaymentIntent id, an X-Message-Id).
	VendorRef string
	// Result is the JSON stored and replayed as the op's result. It must hold no secret.
	Result json.RawMessage
}

// Outcome is the class of a failed dispatch.
type Outcome int

const (
	// OutcomeRetryable means the vendor provably did not act (connection refused, key in
	// use, rate limited before execution): the op may be sent again with the same key.
	OutcomeRetryable Outcome = iota + 1
	// OutcomePermanent means the vendor refused (card declined, invalid request): the
	// refusal is stored and replayed as the op's result.
	OutcomePermanent
	// OutcomeUnknown means the vendor may or may not have acted (timeout after the
	// request was sent, connection reset mid-response, a 5xx): the op must be
	// reconciled from the vendor's records, never resent blindly.
	OutcomeUnknown
)

// String returns the outcome's stable name.
func (o Outcome) String() string {
	switch o {
	case OutcomeRetryable:
		return "retryable"
	case OutcomePermanent:
		return "permanent"
	case OutcomeUnknown:
		return "unknown"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// DispatchError is a vendor error classified into an outcome class.
type DispatchError struct {
	Outcome Outcome
	// Code is a short machine-readable reason, such as "card_declined" or "timeout".
	Code string
	// Message is a human sentence, free of secrets.
	Message string
	// HTTPStatus is the vendor's HTTP status, 0 when none came back.
	HTTPStatus int
	// RetryAfter, for OutcomeRetryable, is how long the vendor asked to wait.
	RetryAfter time.Duration
	// Replayed is true when the vendor answered with a stored response for this key
	// (Stripe's Idempotent-Replayed): this call did nothing new.
	Replayed bool
	// Unanswered is true when the request was written whole but no answer came back
	// (a timeout or a lost connection). With a vendor that deduplicates keys, the
	// worker resends such a request under the same key while the vendor remembers it,
	// instead of leaving the outcome to the reconciler.
	Unanswered bool
	// Bug is true when the error can only come from oncebox itself (Stripe's
	// idempotency_error: the same key was sent with other parameters).
	Bug bool
	// Body is the vendor's error body to store for a permanent failure (no secrets).
	Body json.RawMessage
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *DispatchError) Error() string {
	msg := fmt.Sprintf("%s vendor error", e.Outcome)
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.HTTPStatus != 0 {
		msg += fmt.Sprintf(" (HTTP %d)", e.HTTPStatus)
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *DispatchError) Unwrap() error { return e.Err }

// Classify returns the DispatchError in err's chain, or an OutcomeUnknown one wrapping
// err when the vendor did not classify it: an error nobody understood may hide a side
// effect.
func Classify(err error) *DispatchError {
	var de *DispatchError
	if errors.As(err, &de) {
		return de
	}
	return &DispatchError{Outcome: OutcomeUnknown, Code: "unclassified", Message: err.Error(), Err: err}
}

// ErrLookupUnavailable is returned (wrapped) by Vendor.Lookup when the vendor cannot be
// asked at all (SendGrid's Email Activity add-on missing, Stripe search not offered in a
// region). The reconciler sends such ops to needs_review.
var ErrLookupUnavailable = errors.New("vendor lookup unavailable")

// LookupParams identifies the op whose objects a Lookup should find.
type LookupParams struct {
	OpID     string
	TenantID int64
	Tool     string
	Args     json.RawMessage
	// VendorRef is the reference recorded for the op, if any.
	VendorRef string
	// Since is a lower bound on the objects' creation time (the op's first dispatch,
	// minus a margin), for time-bounded list scans.
	Since time.Time
	// LastSent is the latest moment the vendor may have created an object for the op
	// (the end of its last attempt, or an unfinished attempt's start plus the job
	// timeout); zero when not known. A lookup source that is not the vendor's own
	// records (stored vendor events) uses it to tell "not arrived yet" from "absent".
	LastSent time.Time
	// Account is the vendor account the op was accepted under, as in DispatchParams:
	// the lookup reads that account's objects.
	Account Account
}

// LookupResult lists the vendor objects tagged with an op.
type LookupResult struct {
	Objects []VendorObject
}

// VendorObject is one vendor object found by tag.
type VendorObject struct {
	// ID is the vendor's id (PaymentIntent id, Refund id, X-Message-Id).
	ID string
	// OpID is the op id the object is tagged with.
	OpID     string
	Amount   int64
	Currency string
	Status   string
	Created  time.Time
	// Summary is the JSON stored as the op's result when the reconciler adopts the object.
	Summary json.RawMessage
	// Refused is set by the adapter when the object records the vendor's refusal of the
	// op rather than its success (a declined payment left in requires_payment_method, a
	// failed refund): the reconciler adopts it as the op's failure, and the finance
	// report finds it consistent with a failed op. What counts as a refusal is the
	// vendor's knowledge, so only its adapter sets it.
	Refused bool
}

// ClassifyTransport classifies a vendor call that got no HTTP answer. Only a request that
// was never written whole is provably not executed (OutcomeRetryable, code "not_sent");
// after it was written, a timeout or a lost connection may hide a side effect
// (OutcomeUnknown, code "timeout" or "connection_lost", Unanswered). vendor names the
// vendor in the message.
func ClassifyTransport(vendor string, err error, written bool) *DispatchError {
	if err == nil {
		err = errors.New("no response")
	}
	switch {
	case !written:
		return &DispatchError{Outcome: OutcomeRetryable, Code: "not_sent",
			Message: "the request was not sent to " + vendor + ": " + err.Error(), Err: err}
	case isTimeout(err):
		return &DispatchError{Outcome: OutcomeUnknown, Code: "timeout", Unanswered: true,
			Message: "no answer from " + vendor + " in time after the request was sent: " + err.Error(), Err: err}
	default:
		return &DispatchError{Outcome: OutcomeUnknown, Code: "connection_lost", Unanswered: true,
			Message: "the request was sent to " + vendor + " but its answer was lost: " + err.Error(), Err: err}
	}
}

// isTimeout reports whether err is a deadline or a network timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
