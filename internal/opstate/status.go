package opstate

import "github.com/oncebox/oncebox/protocol"

// Purged is not stored: it is where the TTL purge takes a terminal op, whose row is
// deleted (its key and fingerprint are kept as a tombstone for a while).
const Purged protocol.Status = "purged"

// Initial returns the statuses an op is created in (the To of the table's initial
// rows): pending, or awaiting approval when its tool asks for one.
func Initial() []protocol.Status {
	out := make([]protocol.Status, len(initial))
	for i, t := range initial {
		out[i] = t.To
	}
	return out
}

// Actor is who makes a transition; it is recorded on the op's events.
type Actor string

// The actors of the transition table.
const (
	// Worker is the dispatch worker: it claims an op and records the vendor's answer.
	Worker Actor = "worker"
	// Gate is the enqueue's gate: it gives a new op its first status (Initial).
	Gate Actor = "gate"
	// Reconciler is the reconciler (package reconcile): it decides unknown ops from
	// the vendor's records and takes ops stuck in dispatching.
	Reconciler Actor = "reconciler"
	// Person is someone deciding by hand: an approval, a rejection, a manual
	// resolution of an op in review. The event records their name.
	Person Actor = "person"
	// Purge is the TTL purge, which deletes expired terminal ops.
	Purge Actor = "purge"
	// Expiry rejects an op that awaited approval past its expiry: a read of the op, its
	// replay or the periodic sweep, whichever comes first.
	Expiry Actor = "expiry"
	// Steps is the step runner of a composite op (a catalog tool with steps): it settles
	// the parent op once its steps' ops have settled (docs/steps.md).
	Steps Actor = "steps"
)

// Action is what a person does to an op: the transition table gives a person's
// transitions to one action each, so that the right to a transition depends on it.
type Action string

// The actions of a person in the transition table.
const (
	// Approve is an approval (the last one needed releases the op to pending; an earlier
	// one of several keeps it waiting). Only the approval decision takes it, with its
	// policy version, fingerprint, expiry and number of approvers.
	Approve Action = "approve"
	// Reject is the refusal of an op that awaits approval.
	Reject Action = "reject"
	// Resolve settles an op in needs_review or unknown as succeeded or failed.
	Resolve Action = "resolve"
	// Release sends an op in needs_review or unknown back to pending for a resend.
	Release Action = "release"
)
