package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Op statuses the check knows about.
const (
	statusSucceeded   = "succeeded"
	statusFailed      = "failed"
	statusNeedsReview = "needs_review"
)

// OpRecord is one op as oncebox stored it (a row of oncebox_op).
type OpRecord struct {
	// ID is the op id, the value vendor objects carry under oncebox_op.
	ID string
	// Key is the idempotency key.
	Key string
	// Tool is the tool name, such as "stripe.payment_intent".
	Tool string
	// Status is the op's status.
	Status string
}

// VendorObject is one object a fake vendor holds, read from the fake's own
// records, never from oncebox.
type VendorObject struct {
	// Kind is what the object is: "stripe.payment_intent", "stripe.refund",
	// "sendgrid.message" or "webhook.effect".
	Kind string
	// ID is the vendor's id (pi_..., re_..., X-Message-Id, effect id).
	ID string
	// OpID is the object's oncebox_op tag; empty when it has none.
	OpID string
	// Effect is true when the object is a side effect that counts: every
	// refund, message and webhook effect, but only a succeeded payment intent
	// (a declined confirmation leaves a payment intent in
	// requires_payment_method behind, which charged nobody).
	Effect bool
	// Conflict is true when the object carries the marker of a conflicting
	// payload, which oncebox must have refused.
	Conflict bool
	// Detail is a short description for the report.
	Detail string
}

// CheckInput is everything the check compares.
type CheckInput struct {
	// Accepted are the idempotency keys the API accepted (202 or 200), with
	// the tool the harness asked for.
	Accepted map[string]string
	// Ops are the tenant's ops as oncebox stored them.
	Ops []OpRecord
	// Objects are every object the fake vendors hold.
	Objects []VendorObject
	// ConflictsAccepted are keys whose conflicting payload the API accepted
	// instead of answering 422.
	ConflictsAccepted []string
}

// Finding is one violation the check found.
type Finding struct {
	// OpID is the op concerned, when there is one.
	OpID string
	// Key is the idempotency key concerned, when known.
	Key string
	// What says what is wrong.
	What string
}

func (f Finding) String() string {
	var b strings.Builder
	if f.Key != "" {
		fmt.Fprintf(&b, "key=%s ", f.Key)
	}
	if f.OpID != "" {
		fmt.Fprintf(&b, "op=%s ", f.OpID)
	}
	b.WriteString(f.What)
	return b.String()
}

// Report is the result of Check.
type Report struct {
	// Duplicates are ops with more than one side effect at a vendor.
	Duplicates []Finding
	// Lost are accepted ops that are missing or not settled, and succeeded
	// ops without a side effect.
	Lost []Finding
	// Mismatched are failed ops that have a side effect anyway.
	Mismatched []Finding
	// Orphans are vendor objects whose tag names no op of the run, or that
	// carry no tag.
	Orphans []Finding
	// ConflictLeaks are conflicting payloads that were accepted or reached a
	// vendor.
	ConflictLeaks []Finding
	// NeedsReview are the ids of the ops in needs_review.
	NeedsReview []string
	// Statuses counts the ops by status.
	Statuses map[string]int
}

// OK reports whether the run kept every promise.
func (r Report) OK() bool {
	return len(r.Duplicates) == 0 && len(r.Lost) == 0 && len(r.Mismatched) == 0 &&
		len(r.Orphans) == 0 && len(r.ConflictLeaks) == 0
}

// Findings returns every violation, one per line, duplicates and losses first.
func (r Report) Findings() []string {
	var out []string
	add := func(label string, fs []Finding) {
		for _, f := range fs {
			out = append(out, label+": "+f.String())
		}
	}
	add("DUPLICATE", r.Duplicates)
	add("LOST", r.Lost)
	add("MISMATCH", r.Mismatched)
	add("ORPHAN", r.Orphans)
	add("CONFLICT", r.ConflictLeaks)
	return out
}

// Check compares what oncebox says happened with what the vendors hold: exactly
// one side effect per succeeded op, none per failed op, at most one per op in
// needs_review, every accepted key stored and settled, no object without an
// op, and no conflicting payload executed.
func Check(in CheckInput) Report {
	rep := Report{Statuses: map[string]int{}}

	byID := make(map[string]OpRecord, len(in.Ops))
	byKey := make(map[string]OpRecord, len(in.Ops))
	for _, op := range in.Ops {
		byID[op.ID] = op
		byKey[op.Key] = op
		rep.Statuses[op.Status]++
	}

	effects := map[string][]VendorObject{}
	for _, obj := range in.Objects {
		if obj.Conflict {
			rep.ConflictLeaks = append(rep.ConflictLeaks, Finding{OpID: obj.OpID, Key: byID[obj.OpID].Key,
				What: fmt.Sprintf("a conflicting payload reached the vendor: %s %s %s", obj.Kind, obj.ID, obj.Detail)})
		}
		op, known := byID[obj.OpID]
		switch {
		case obj.OpID == "":
			rep.Orphans = append(rep.Orphans, Finding{What: fmt.Sprintf("%s %s carries no oncebox_op tag %s", obj.Kind, obj.ID, obj.Detail)})
			continue
		case !known:
			rep.Orphans = append(rep.Orphans, Finding{OpID: obj.OpID,
				What: fmt.Sprintf("%s %s is tagged with an op that does not exist %s", obj.Kind, obj.ID, obj.Detail)})
			continue
		case obj.Kind != kindOf(op.Tool):
			rep.Orphans = append(rep.Orphans, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s %s is tagged with an op of tool %s", obj.Kind, obj.ID, op.Tool)})
			continue
		}
		if obj.Effect {
			effects[obj.OpID] = append(effects[obj.OpID], obj)
		}
	}

	for _, op := range in.Ops {
		got := effects[op.ID]
		switch {
		case len(got) > 1:
			rep.Duplicates = append(rep.Duplicates, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s op in status %s has %d side effects: %s", op.Tool, op.Status, len(got), describe(got))})
		case op.Status == statusSucceeded && len(got) == 0:
			rep.Lost = append(rep.Lost, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s op succeeded but the vendor holds no side effect for it", op.Tool)})
		case op.Status == statusFailed && len(got) == 1:
			rep.Mismatched = append(rep.Mismatched, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s op failed but the vendor holds a side effect for it: %s", op.Tool, describe(got))})
		}
		switch op.Status {
		case statusSucceeded, statusFailed:
		case statusNeedsReview:
			rep.NeedsReview = append(rep.NeedsReview, op.ID)
		default:
			if _, ok := in.Accepted[op.Key]; ok {
				rep.Lost = append(rep.Lost, Finding{OpID: op.ID, Key: op.Key,
					What: fmt.Sprintf("%s op accepted but not settled: status %s", op.Tool, op.Status)})
			}
		}
	}

	keys := make([]string, 0, len(in.Accepted))
	for key := range in.Accepted {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		op, ok := byKey[key]
		switch {
		case !ok:
			rep.Lost = append(rep.Lost, Finding{Key: key, What: fmt.Sprintf("%s op accepted by the API but not stored", in.Accepted[key])})
		case op.Tool != in.Accepted[key]:
			rep.Mismatched = append(rep.Mismatched, Finding{OpID: op.ID, Key: key,
				What: fmt.Sprintf("stored as tool %s, sent as %s", op.Tool, in.Accepted[key])})
		}
	}
	for _, key := range in.ConflictsAccepted {
		rep.ConflictLeaks = append(rep.ConflictLeaks, Finding{Key: key, OpID: byKey[key].ID,
			What: "the same key with another payload was accepted instead of refused with 422"})
	}
	slices.Sort(rep.NeedsReview)
	return rep
}

// kindOf returns the kind of vendor object a tool creates.
func kindOf(tool string) string {
	switch tool {
	case toolPaymentIntent:
		return kindPaymentIntent
	case toolRefund:
		return kindRefund
	case toolMail:
		return kindMessage
	case toolWebhook:
		return kindEffect
	}
	return ""
}

func describe(objs []VendorObject) string {
	parts := make([]string, 0, len(objs))
	for _, o := range objs {
		parts = append(parts, strings.TrimSpace(o.Kind+" "+o.ID+" "+o.Detail))
	}
	return strings.Join(parts, "; ")
}
