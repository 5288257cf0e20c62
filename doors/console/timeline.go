package console

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
)

// TimelineEntry is one moment in an op's life.
type TimelineEntry struct {
	At    time.Time
	What  string
	Who   string
	Notes string
	// rank orders entries at the same instant by cause: the creation, then a claim,
	// the vendor's answer, a decision, a vendor event.
	rank int
}

// Timeline puts an op's creation, attempts, decisions and vendor events in causal
// order, for the console and `oncebox lookup`: by time, ties broken by cause. A vendor
// event's time is the vendor's, to the second, so it is never put before the call that
// made its object (the first attempt, else the creation). Decisions read as sentences
// (DecisionSentence).
func Timeline(op *outbox.Op, h *outbox.History, evs []vendorevents.Event) []TimelineEntry {
	tl := []TimelineEntry{{At: op.CreatedAt, What: "asked for", Who: ActorName("agent")}}
	if op.ConversationID != "" {
		tl[0].Notes = "conversation " + op.ConversationID
	}
	floor := op.CreatedAt
	for i, a := range h.Attempts {
		if i == 0 && a.StartedAt.After(floor) {
			floor = a.StartedAt
		}
		tl = append(tl, TimelineEntry{At: a.StartedAt, What: fmt.Sprintf("attempt %d: sent to %s", a.Attempt, vendorName(op.Vendor)),
			Who: ActorName("worker"), rank: 1})
		if a.FinishedAt != nil {
			notes := strings.TrimSpace(strings.Join([]string{a.VendorRef, a.Error}, " "))
			tl = append(tl, TimelineEntry{At: *a.FinishedAt, What: fmt.Sprintf("%s answered attempt %d: %s", vendorName(op.Vendor), a.Attempt, outcomeWords(a.Outcome)),
				Who: vendorName(op.Vendor), Notes: notes, rank: 2})
		}
	}
	for _, m := range h.Matches {
		tl = append(tl, TimelineEntry{At: m.At, What: "call matched by identity: the same operation in other words, not executed",
			Who: ActorName("agent"), Notes: matchNotes(m), rank: 3})
	}
	for _, e := range h.Events {
		te := TimelineEntry{At: e.At, What: DecisionSentence(op, e), Who: ActorName(e.Actor), rank: 3}
		if e.Kind == "steps" {
			te.Notes = stepNotes(op, e)
		}
		tl = append(tl, te)
	}
	for _, e := range evs {
		at := e.OccurredAt
		if at.Before(floor) {
			at = floor
		}
		notes := strings.TrimSpace(e.ObjectType + " " + e.ObjectID + " " + e.Status)
		if e.Unconfirmed {
			notes += " (unconfirmed: the op's object is not known yet)"
		}
		tl = append(tl, TimelineEntry{At: at, What: "vendor event: " + e.Type, Who: vendorName(op.Vendor), Notes: notes, rank: 4})
	}
	slices.SortStableFunc(tl, func(a, b TimelineEntry) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return a.rank - b.rank
	})
	return tl
}

// decisionDetail is what DecisionSentence reads of an event's detail.
type decisionDetail struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	Error    string `json:"error"`
	Objects  []struct {
		ID string `json:"id"`
	} `json:"objects"`
	NextCheckAt *time.Time `json:"next_check_at"`
	Approvals   int        `json:"approvals"`
	Needed      int        `json:"approvers_needed"`
	// A composite op's step events (kind "steps"): the step enqueued, or the run's
	// state and why.
	Enqueued string `json:"enqueued"`
	Key      string `json:"key"`
	State    string `json:"state"`
	Why      string `json:"why"`
}

// DecisionSentence says in a sentence what a recorded decision about op did: "the
// reconciler found the charge pi_123 at Stripe and settled the op as succeeded". An
// event it does not know reads as its kind and its change of status.
func DecisionSentence(op *outbox.Op, e outbox.Event) string {
	var d decisionDetail
	_ = json.Unmarshal(e.Detail, &d)
	var ids []string
	for _, o := range d.Objects {
		ids = append(ids, o.ID)
	}
	obj, at := objectNoun(op.Tool), " at "+vendorName(op.Vendor)
	s := e.Kind
	switch {
	case e.Kind == "reconcile" && d.Decision == reconcile.Succeeded && len(ids) == 1:
		s = "the reconciler found " + obj + " " + ids[0] + at + " and settled the op as succeeded"
	case e.Kind == "reconcile" && d.Decision == reconcile.Refused && len(ids) == 1:
		s = "the reconciler found " + obj + " " + ids[0] + at + ", which records a refusal, and settled the op as failed"
	case e.Kind == "reconcile" && d.Decision == reconcile.Duplicate:
		s = "the reconciler found several objects" + at + " (" + strings.Join(ids, ", ") + ") and handed the op to a person"
	case e.Kind == "reconcile" && (d.Decision == reconcile.Resend || d.Decision == reconcile.ResendNewKey):
		s = "the reconciler found no " + strings.TrimPrefix(obj, "the ") + at + " after the lookup lag and released the op for a resend"
		if d.Decision == reconcile.ResendNewKey {
			s += " under a new vendor key"
		}
	case e.Kind == "reconcile" && d.Decision == reconcile.Wait && d.NextCheckAt != nil:
		s = "the reconciler found nothing" + at + " yet and will look again at " + d.NextCheckAt.UTC().Format(time.RFC3339)
	case e.Kind == "reconcile" && (d.Decision == reconcile.NoneReview || d.Decision == reconcile.AttemptsExhausted):
		s = "the reconciler found no " + strings.TrimPrefix(obj, "the ") + at + " and handed the op to a person"
	case e.Kind == "reconcile" && (d.Decision == reconcile.LookupFailed || d.Decision == reconcile.LookupUnavailable):
		s = "the reconciler could not ask " + vendorName(op.Vendor) + " (" + d.Error + ")"
	case e.Kind == "reconcile" && d.Decision != "":
		s = "the reconciler decided " + strings.ReplaceAll(d.Decision, "_", " ")
	case e.Kind == "approval_given":
		s = fmt.Sprintf("approved it (%d of %d approvals)", d.Approvals, d.Needed)
	case e.Kind == "approved" || e.Kind == "rejected":
		s = e.Kind + " it"
	case e.Kind == "steps":
		s = stepSentence(e, d)
	case e.Kind == "manual_resolution" && d.Decision == "released_for_resend":
		s = "released it to be sent again"
	case e.Kind == "manual_resolution":
		s = "resolved it by hand"
	}
	if e.FromStatus != e.ToStatus && !strings.Contains(s, "settled the op") && e.Kind != "steps" {
		s += ": now " + StatusWords(e.ToStatus)
	}
	if d.Reason != "" {
		s += " (reason: " + d.Reason + ")"
	}
	return s
}

// objectNoun names the vendor object a tool makes.
func objectNoun(tool string) string {
	switch tool {
	case protocol.ToolPaymentIntent:
		return "the charge"
	case protocol.ToolRefund:
		return "the refund"
	case protocol.ToolMail:
		return "the message"
	}
	return "the object"
}

// vendorName is a vendor's name as people write it.
func vendorName(vendor string) string {
	switch vendor {
	case "stripe":
		return "Stripe"
	case "sendgrid":
		return "SendGrid"
	}
	return "the " + vendor + " target"
}

// stepSentence says what a composite op's step event did: a step started, the run's
// state changed, or the op settled by its steps.
func stepSentence(e outbox.Event, d decisionDetail) string {
	switch {
	case d.Enqueued != "":
		return "step " + d.Enqueued + " started, as an op of its own"
	case d.State != "":
		return "settled by its steps: now " + StatusWords(e.ToStatus)
	}
	s := "steps " + stepStateWords(e.ToStatus)
	if d.Why != "" {
		s += ": " + d.Why
	}
	return s
}

// stepStateWords says a composite op's run state (opstate.StepState) in words.
func stepStateWords(st string) string {
	switch st {
	case "succeeded":
		return "finished"
	case "compensating":
		return "being undone"
	case "compensated":
		return "undone"
	case "needs_review":
		return "waiting for a person"
	}
	return st
}

// stepNotes names the op of the step a step event started, by the caller's key.
func stepNotes(op *outbox.Op, e outbox.Event) string {
	var d decisionDetail
	_ = json.Unmarshal(e.Detail, &d)
	if d.Enqueued == "" {
		return ""
	}
	return "op " + stepLabel(op.Key, d.Enqueued)
}
