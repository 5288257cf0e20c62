package opstate

import (
	"slices"

	"github.com/oncebox/oncebox/protocol"
)

// Transition is one allowed change of an op's status: from, to, who may make it, and,
// for a person, by which action.
type Transition struct {
	From, To protocol.Status
	By       Actor
	// Why says when it happens, in a few words (it labels the state diagram of docs/reliability.md).
	Why string
	// Action is what a person does to make it (approve, reject, resolve, release): a
	// person's right to a transition depends on the action, so that a manual resolution
	// can never take the approval's route. Empty for the other actors.
	Action Action
}

// initial are the statuses an op is created in, From "" (no status yet): the enqueue
// inserts every op pending, in the caller's transaction; a gate's hold moves it, in the
// same transaction, to awaiting_approval through Machine.Hold, which writes its event,
// metric and log line like any transition.
var initial = []Transition{
	{"", protocol.StatusPending, Gate, "admitted", ""},
	{"", protocol.StatusAwaitingApproval, Gate, "held for a person (the gate's verdict, or the tool's NeedsApproval)", ""},
}

// InitialTransitions returns the table's initial rows (From "").
func InitialTransitions() []Transition { return slices.Clone(initial) }

// transitions is the op state machine: every status change oncebox makes, and who makes
// it. Machine consults it before every write and refuses anything else
// (ErrNotAllowed); TestEveryTransition walks it against Postgres, and the state
// diagram of docs/reliability.md is checked against it (TestDiagramMatchesTable).
//
// To add a transition: add a row here; write (or reuse) the Machine method that makes
// it, its SQL in queries.go guarded by the from status; add a case to
// TestEveryTransition that drives the op into From and makes the change; then run
// `go test ./internal/opstate -run Diagram -update` to regenerate the diagram.
// A self-loop (From == To) is a write that keeps the status (a new claim, a slow
// worker's late answer): it records an event or attempt but counts no state change.
var transitions = []Transition{
	{protocol.StatusAwaitingApproval, protocol.StatusPending, Person, "approve", Approve},
	{protocol.StatusAwaitingApproval, protocol.StatusRejected, Person, "reject", Reject},
	{protocol.StatusAwaitingApproval, protocol.StatusRejected, Expiry, "nobody decided within --approval-expiry", ""},
	{protocol.StatusAwaitingApproval, protocol.StatusAwaitingApproval, Person, "one approval of several (four eyes)", Approve},

	{protocol.StatusPending, protocol.StatusDispatching, Worker, "claim (committed before the vendor is called; a run that is not clean, or --claim-commit)", ""},
	{protocol.StatusPending, protocol.StatusUnknown, Worker, "resend window passed, an earlier run may have sent unheard outside the key window, or a clean run's outcome unknown", ""},
	// A clean run (no earlier run may have called the vendor unheard) calls without a
	// claim commit: River's fetch of its job is the claim, and the answer is recorded
	// straight from pending (docs/reliability.md, "Fencing").
	{protocol.StatusPending, protocol.StatusPending, Worker, "clean run, retryable", ""},
	{protocol.StatusPending, protocol.StatusSucceeded, Worker, "clean run, vendor said yes", ""},
	{protocol.StatusPending, protocol.StatusFailed, Worker, "clean run, vendor said no", ""},
	{protocol.StatusPending, protocol.StatusNeedsReview, Worker, "clean run, attempts exhausted, args unreadable, or a bug", ""},
	{protocol.StatusDispatching, protocol.StatusDispatching, Worker, "claim again inside the key window (predecessor died)", ""},
	{protocol.StatusDispatching, protocol.StatusPending, Worker, "retryable (not executed, or unanswered inside the key window)", ""},
	{protocol.StatusDispatching, protocol.StatusSucceeded, Worker, "vendor said yes", ""},
	{protocol.StatusDispatching, protocol.StatusFailed, Worker, "vendor said no (stored, replayed)", ""},
	{protocol.StatusDispatching, protocol.StatusUnknown, Worker, "outcome unknown, or predecessor lost outside the key window", ""},
	{protocol.StatusDispatching, protocol.StatusNeedsReview, Worker, "attempts exhausted, args unreadable, or a bug", ""},
	// A worker that was slow rather than dead still records a definite answer on an op
	// a successor (or the sweeper) moved to unknown: its attempt token still matches.
	{protocol.StatusUnknown, protocol.StatusPending, Worker, "late answer, retryable", ""},
	{protocol.StatusUnknown, protocol.StatusSucceeded, Worker, "late answer, yes", ""},
	{protocol.StatusUnknown, protocol.StatusFailed, Worker, "late answer, no", ""},
	{protocol.StatusUnknown, protocol.StatusUnknown, Worker, "late answer, unknown", ""},
	{protocol.StatusUnknown, protocol.StatusNeedsReview, Worker, "late answer, attempts exhausted", ""},

	{protocol.StatusDispatching, protocol.StatusUnknown, Reconciler, "stuck (no job running past the job timeout)", ""},
	{protocol.StatusPending, protocol.StatusPending, Reconciler, "its dispatch job is gone (deleted, or finished early): a new one", ""},
	{protocol.StatusPending, protocol.StatusNeedsReview, Reconciler, "its dispatch job was discarded or cancelled", ""},
	{protocol.StatusUnknown, protocol.StatusSucceeded, Reconciler, "exactly one object", ""},
	{protocol.StatusUnknown, protocol.StatusFailed, Reconciler, "exactly one object, recording a refusal", ""},
	{protocol.StatusUnknown, protocol.StatusPending, Reconciler, "none after the lookup lag, resend", ""},
	{protocol.StatusUnknown, protocol.StatusNeedsReview, Reconciler, "several objects, cannot ask, or no resend", ""},
	{protocol.StatusUnknown, protocol.StatusUnknown, Reconciler, "look again later (lookup lag, lookup failed)", ""},

	{protocol.StatusNeedsReview, protocol.StatusSucceeded, Person, "resolved, it happened", Resolve},
	{protocol.StatusNeedsReview, protocol.StatusFailed, Person, "resolved, it did not happen", Resolve},
	{protocol.StatusNeedsReview, protocol.StatusPending, Person, "released for resend", Release},
	{protocol.StatusUnknown, protocol.StatusSucceeded, Person, "resolved, it happened", Resolve},
	{protocol.StatusUnknown, protocol.StatusFailed, Person, "resolved, it did not happen", Resolve},
	{protocol.StatusUnknown, protocol.StatusPending, Person, "released for resend", Release},

	// A composite op (docs/steps.md) is never dispatched: it stays pending while its
	// steps run, and the step runner settles it from its steps' ops.
	{protocol.StatusPending, protocol.StatusSucceeded, Steps, "composite op, every step done", ""},
	{protocol.StatusPending, protocol.StatusFailed, Steps, "composite op, a step failed (compensated, or nothing to undo)", ""},
	{protocol.StatusPending, protocol.StatusNeedsReview, Steps, "composite op, a step or a compensation needs a person", ""},

	{protocol.StatusSucceeded, Purged, Purge, "TTL over", ""},
	{protocol.StatusFailed, Purged, Purge, "TTL over", ""},
	{protocol.StatusRejected, Purged, Purge, "TTL over", ""},
}

// Transitions returns a copy of the transition table.
func Transitions() []Transition { return slices.Clone(transitions) }

// Allowed reports whether by may move an op from one status to another by action (a
// person's: approve, reject, resolve, release; "" for the other actors). A person who
// resolves or releases an op may not take the approval's row: the row says "approve".
// From "" is an op's creation: the initial rows (Initial).
func Allowed(from, to protocol.Status, by Actor, action Action) bool {
	rows := transitions
	if from == "" {
		rows = initial
	}
	return slices.ContainsFunc(rows, func(t Transition) bool {
		return t.From == from && t.To == to && t.By == by && t.Action == action
	})
}

// ActionsFor returns the actions by which by may move an op from one status to another
// (nil when none may).
func ActionsFor(from, to protocol.Status, by Actor) []Action {
	var out []Action
	for _, t := range transitions {
		if t.From == from && t.To == to && t.By == by {
			out = append(out, t.Action)
		}
	}
	return out
}

// Statuses returns every stored status, in the order of the table's first mention.
func Statuses() []protocol.Status {
	var out []protocol.Status
	for _, s := range Initial() {
		out = append(out, s)
	}
	for _, t := range transitions {
		for _, s := range []protocol.Status{t.From, t.To} {
			if s != Purged && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// sources returns the statuses from which by may move an op to to, as text (for SQL
// guards built from the table).
func sources(to protocol.Status, by Actor) []string {
	var out []string
	for _, t := range transitions {
		if t.To == to && t.By == by {
			out = append(out, string(t.From))
		}
	}
	return out
}
