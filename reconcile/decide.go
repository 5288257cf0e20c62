package reconcile

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// The decisions a sweep takes, as recorded in op events (detail "decision") and passed
// to Observer.Decision.
const (
	// Stuck moved an op found in dispatching long past its job timeout, with
	// no job running, to unknown.
	Stuck = "stuck_dispatching"
	// Rejob gave a new dispatch job to a pending op whose job was gone (deleted,
	// or finished while the op went back to pending).
	Rejob = "dispatch_job_missing"
	// JobDiscarded handed a pending op whose dispatch job River discarded or
	// someone cancelled to a person.
	JobDiscarded = "dispatch_job_discarded"
	// Succeeded adopted the one object the vendor holds: the op succeeded.
	Succeeded = "succeeded"
	// Refused adopted the one object the vendor holds, which records a refusal
	// (a declined payment): the op failed.
	Refused = "refused_at_vendor"
	// Resend found no object after the lookup lag: the op goes back to pending
	// with the same vendor key.
	Resend = "resend"
	// ResendNewKey is Resend for an op whose vendor key replays a stored
	// failure: the op moves to the next generation and a new vendor key.
	ResendNewKey = "resend_new_key"
	// NoneReview found no object after the lookup lag for a vendor configured
	// not to resend (Config.ResendOnNone): a person decides.
	NoneReview = "none_found_review"
	// AttemptsExhausted found no object, but the op has had Config.MaxAttempts
	// attempts already: a person decides.
	AttemptsExhausted = "attempts_exhausted"
	// Wait found no object while the vendor's lookup lag may still hide it: the
	// op is checked again once the lag is over.
	Wait = "wait"
	// Duplicate found two or more objects for one op: a person decides.
	Duplicate = "duplicate"
	// LookupUnavailable means the vendor cannot be asked at all: a person
	// decides.
	LookupUnavailable = "lookup_unavailable"
	// LookupFailed means the lookup failed (rate limit, network): the op is
	// checked again after Config.RetryLookupAfter.
	LookupFailed = "lookup_failed"
)

// eventKind is the kind of the reconciler's events (their actor is opstate.Reconciler).
const eventKind = "reconcile"

// lookupAnswer is what the reconciler learned about one unknown op: the op as it stood, and
// the vendor's answer to the lookup or why none came.
type lookupAnswer struct {
	c   *candidate
	res *vendorapi.LookupResult
	err error
	// askedAt is when the vendor was asked; lag is its lookup lag and jobTimeout its
	// dispatch job timeout (a dead worker's request may have been sent until then).
	askedAt    time.Time
	lag        time.Duration
	jobTimeout time.Duration
}

// policy is the configuration a decision follows, for the op's vendor.
type policy struct {
	now              time.Time
	retryLookupAfter time.Duration
	maxAttempts      int
	// resendOnNone: resend when the vendor holds nothing after the lag (false: a person
	// decides).
	resendOnNone bool
}

// settlement is how the reconciler settles one unknown op, before it is written: the
// op's change (adopted, resent, handed to a person, or checked again later) and its
// name, one of the decision constants.
type settlement struct {
	name string
	// ids are the objects found, for a duplicate's log line.
	ids    []string
	change opstate.Change
}

// objectDetail is what an event records about one vendor object.
type objectDetail struct {
	ID       string    `json:"id"`
	Status   string    `json:"status,omitempty"`
	Amount   int64     `json:"amount,omitempty"`
	Currency string    `json:"currency,omitempty"`
	Created  time.Time `json:"created,omitzero"`
}

// decide turns a lookup's answer into a settlement: exactly one object is adopted
// (succeeded, or failed when the vendor's answer says it records a refusal); none is
// trusted only after the lookup lag, then resent (or handed to a person); several, or a
// vendor that cannot be asked, go to a person; a failed lookup is asked again later. It
// does no I/O. The settlement's change does not redact: the caller does, for a terminal op.
func decide(a lookupAnswer, p policy) settlement {
	c := a.c
	detail := map[string]any{"vendor": c.vendor, "lookup_since": c.since()}
	change := func(name string, to protocol.Status) settlement {
		detail["decision"] = name
		return settlement{name: name, change: opstate.Change{OpID: c.id, From: protocol.StatusUnknown, To: to,
			By: opstate.Reconciler, Kind: eventKind, Detail: detail, Attrs: []any{slog.String("decision", name)}}}
	}
	checkLater := func(name string, at time.Time) settlement {
		detail["next_check_at"] = at
		d := change(name, protocol.StatusUnknown)
		d.change.NextCheck = at
		d.change.Message = "op checked"
		d.change.Attrs = append(d.change.Attrs, slog.Time("next_check_at", at))
		return d
	}
	toReview := func(name string) settlement { return change(name, protocol.StatusNeedsReview) }

	// Cannot ask.
	if a.err != nil {
		detail["error"] = a.err.Error()
		if errors.Is(a.err, vendorapi.ErrLookupUnavailable) {
			return toReview(LookupUnavailable)
		}
		return checkLater(LookupFailed, p.now.Add(p.retryLookupAfter))
	}

	// Only an object tagged with this op is its outcome: one tagged for another op, or
	// carrying no tag at all, is never adopted, whatever an adapter's own filter let
	// through.
	var objects []vendorapi.VendorObject
	for _, o := range a.res.Objects {
		if o.OpID == c.id {
			objects = append(objects, o)
		}
	}
	details := make([]objectDetail, len(objects))
	ids := make([]string, len(objects))
	for i, o := range objects {
		details[i] = objectDetail{ID: o.ID, Status: o.Status, Amount: o.Amount, Currency: o.Currency, Created: o.Created}
		ids[i] = o.ID
	}
	detail["objects"] = details

	switch {
	case len(objects) == 1:
		return adopt(objects[0], change)
	case len(objects) > 1:
		d := toReview(Duplicate)
		d.ids = ids
		return d
	}

	// None. Trust it only once the lag has passed since the last moment the vendor may
	// have created an object.
	visibleFrom := c.lastSent(a.jobTimeout).Add(a.lag)
	if a.askedAt.Before(visibleFrom) {
		detail["lookup_lag"] = a.lag.String()
		return checkLater(Wait, visibleFrom)
	}
	if !p.resendOnNone {
		return toReview(NoneReview)
	}
	if c.attempts >= p.maxAttempts {
		detail["attempts"] = c.attempts
		return toReview(AttemptsExhausted)
	}
	if c.staleKey {
		// The vendor answers the current key with a stored failure: a resend under it
		// would only replay that failure.
		detail["generation"] = c.generation + 1
		d := change(ResendNewKey, protocol.StatusPending)
		d.change.NewVendorKey = vendorapi.VendorKey(c.tenantID, c.key, c.tool, c.generation+1)
		return d
	}
	return change(Resend, protocol.StatusPending)
}

// adopt records the one object the vendor holds as the op's outcome: failed when the
// vendor's adapter says the object records a refusal, succeeded otherwise.
func adopt(obj vendorapi.VendorObject, change func(string, protocol.Status) settlement) settlement {
	summary := obj.Summary
	if len(summary) == 0 || !json.Valid(summary) {
		summary, _ = json.Marshal(map[string]string{"id": obj.ID})
	}
	if obj.Refused {
		d := change(Refused, protocol.StatusFailed)
		d.change.Error, _ = json.Marshal(map[string]any{
			"class":   "permanent",
			"code":    Refused,
			"message": fmt.Sprintf("the vendor holds %s in status %q: it refused the request", obj.ID, obj.Status),
			"vendor":  summary,
		})
		d.change.VendorRef = obj.ID
		return d
	}
	d := change(Succeeded, protocol.StatusSucceeded)
	d.change.Result, d.change.VendorRef = summary, obj.ID
	return d
}

// redact fills in what a change that makes the op terminal stores redacted: its args,
// unless they are stored redacted already (the full ones are sealed, and the transition
// drops that sealed copy), and its result.
func redact(tools Tools, c *candidate, ch *opstate.Change) {
	tool, ok := tools.Lookup(c.tool)
	if !ok {
		return
	}
	if tool.Redact != nil && !c.sealed {
		ch.RedactedArgs = tool.Redact(c.args)
	}
	if tool.RedactResult != nil && ch.Result != nil {
		ch.Result = tool.RedactResult(ch.Result)
	}
}
