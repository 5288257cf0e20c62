package opstate

import "slices"

// Transition is one allowed change of an op's status: from, to, who may make it, and,
// for a person, by which action.
type Transition struct {
	From, To Status
	By       Actor
	// Why says when it happens, in a few words (it labels the state diagram of docs/reliability.md).
	Why string
	// Action is what a person does to make it (approve, reject, resolve, release): a
	// person's right to a transition depends on the action, so that a manual resolution
	// can never take the approval's route. Empty for the other actors.
	Action Action
}

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
	{AwaitingApproval, Pending, Person, "approve", Approve},
	{AwaitingApproval, Rejected, Person, "reject", Reject},
	{AwaitingApproval, Rejected, Expiry, "nobody decided within --approval-expiry", ""},
	{AwaitingApproval, AwaitingApproval, Person, "one approval of several (four eyes)", Approve},

	{Pending, Dispatching, Worker, "claim (committed before the vendor is called; a run that is not clean, or --claim-commit)", ""},
	{Pending, Unknown, Worker, "resend window passed, an earlier run may have sent unheard outside the key window, or a clean run's outcome unknown", ""},
	// A clean run (no earlier run may have called the vendor unheard) calls without a
	// claim commit: River's fetch of its job is the claim, and the answer is recorded
	// straight from pending (docs/reliability.md, "Fencing").
	{Pending, Pending, Worker, "clean run, retryable", ""},
	{Pending, Succeeded, Worker, "clean run, vendor said yes", ""},
	{Pending, Failed, Worker, "clean run, vendor said no", ""},
	{Pending, NeedsReview, Worker, "clean run, attempts exhausted, args unreadable, or a bug", ""},
	{Dispatching, Dispatching, Worker, "claim again inside the key window (predecessor died)", ""},
	{Dispatching, Pending, Worker, "retryable (not executed, or unanswered inside the key window)", ""},
	{Dispatching, Succeeded, Worker, "vendor said yes", ""},
	{Dispatching, Failed, Worker, "vendor said no (stored, replayed)", ""},
	{Dispatching, Unknown, Worker, "outcome unknown, or predecessor lost outside the key window", ""},
	{Dispatching, NeedsReview, Worker, "attempts exhausted, args unreadable, or a bug", ""},
	// A worker that was slow rather than dead still records a definite answer on an op
	// a successor (or the sweeper) moved to unknown: its attempt token still matches.
	{Unknown, Pending, Worker, "late answer, retryable", ""},
	{Unknown, Succeeded, Worker, "late answer, yes", ""},
	{Unknown, Failed, Worker, "late answer, no", ""},
	{Unknown, Unknown, Worker, "late answer, unknown", ""},
	{Unknown, NeedsReview, Worker, "late answer, attempts exhausted", ""},

	{Dispatching, Unknown, Reconciler, "stuck (no job running past the job timeout)", ""},
	{Pending, Pending, Reconciler, "its dispatch job is gone (deleted, or finished early): a new one", ""},
	{Pending, NeedsReview, Reconciler, "its dispatch job was discarded or cancelled", ""},
	{Unknown, Succeeded, Reconciler, "exactly one object", ""},
	{Unknown, Failed, Reconciler, "exactly one object, recording a refusal", ""},
	{Unknown, Pending, Reconciler, "none after the lookup lag, resend", ""},
	{Unknown, NeedsReview, Reconciler, "several objects, cannot ask, or no resend", ""},
	{Unknown, Unknown, Reconciler, "look again later (lookup lag, lookup failed)", ""},

	{NeedsReview, Succeeded, Person, "resolved, it happened", Resolve},
	{NeedsReview, Failed, Person, "resolved, it did not happen", Resolve},
	{NeedsReview, Pending, Person, "released for resend", Release},
	{Unknown, Succeeded, Person, "resolved, it happened", Resolve},
	{Unknown, Failed, Person, "resolved, it did not happen", Resolve},
	{Unknown, Pending, Person, "released for resend", Release},

	{Succeeded, Purged, Purge, "TTL over", ""},
	{Failed, Purged, Purge, "TTL over", ""},
	{Rejected, Purged, Purge, "TTL over", ""},
}

// Transitions returns a copy of the transition table.
func Transitions() []Transition { return slices.Clone(transitions) }

// Allowed reports whether by may move an op from one status to another by action (a
// person's: approve, reject, resolve, release; "" for the other actors). A person who
// resolves or releases an op may not take the approval's row: the row says "approve".
func Allowed(from, to Status, by Actor, action Action) bool {
	return slices.ContainsFunc(transitions, func(t Transition) bool {
		return t.From == from && t.To == to && t.By == by && t.Action == action
	})
}

// ActionsFor returns the actions by which by may move an op from one status to another
// (nil when none may).
func ActionsFor(from, to Status, by Actor) []Action {
	var out []Action
	for _, t := range transitions {
		if t.From == from && t.To == to && t.By == by {
			out = append(out, t.Action)
		}
	}
	return out
}

// Statuses returns every stored status, in the order of the table's first mention.
func Statuses() []Status {
	var out []Status
	for _, s := range Initial() {
		out = append(out, s)
	}
	for _, t := range transitions {
		for _, s := range []Status{t.From, t.To} {
			if s != Purged && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// sources returns the statuses from which by may move an op to to, as text (for SQL
// guards built from the table).
func sources(to Status, by Actor) []string {
	var out []string
	for _, t := range transitions {
		if t.To == to && t.By == by {
			out = append(out, string(t.From))
		}
	}
	return out
}
