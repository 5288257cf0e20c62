package opstate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// StepState is the state of a composite op's run of its steps (oncebox_step_run.state),
// beside the parent op's own status (docs/steps.md).
type StepState string

// The states of a step run.
const (
	// StepRunning: steps are being run, one op at a time, in order.
	StepRunning StepState = "running"
	// StepSucceeded: every step succeeded or was skipped by its when.
	StepSucceeded StepState = "succeeded"
	// StepFailed: a required step failed for good, and no step done before it
	// declares a compensation.
	StepFailed StepState = "failed"
	// StepCompensating: a required step failed for good; the compensations of the
	// steps done before it run, in reverse order.
	StepCompensating StepState = "compensating"
	// StepCompensated: every compensation succeeded.
	StepCompensated StepState = "compensated"
	// StepNeedsReview: a step's op or a compensation's op is in needs_review, or a
	// compensation failed: a person decides.
	StepNeedsReview StepState = "needs_review"
)

// Terminal reports whether the step run is over.
func (s StepState) Terminal() bool {
	return s != StepRunning && s != StepCompensating
}

// StepTransition is one allowed change of a step run's state, and who makes it.
type StepTransition struct {
	From, To StepState
	By       Actor
	// Why says when it happens (it labels the diagram of docs/steps.md).
	Why string
}

// stepTransitions is the state machine of a composite op's run of its steps. Every
// change goes through Machine.ApplyStep, which refuses anything else; the diagram of
// docs/steps.md is checked against it (TestStepDiagramMatchesTable).
var stepTransitions = []StepTransition{
	{StepRunning, StepRunning, Steps, "a step settled or was skipped: the next step's op is enqueued"},
	{StepRunning, StepSucceeded, Steps, "every step succeeded or was skipped (the parent op succeeds)"},
	{StepRunning, StepFailed, Steps, "a required step failed for good (refused, rejected), nothing done to undo (the parent op fails)"},
	{StepRunning, StepCompensating, Steps, "a required step failed for good; steps done before it declare compensate"},
	{StepRunning, StepNeedsReview, Steps, "a step's op is in needs_review (so is the parent op)"},
	{StepCompensating, StepCompensating, Steps, "a compensation succeeded: the next one is enqueued"},
	{StepCompensating, StepCompensated, Steps, "every compensation succeeded (the parent op fails)"},
	{StepCompensating, StepNeedsReview, Steps, "a compensation failed or is in needs_review (so is the parent op)"},
	{StepNeedsReview, StepRunning, Steps, "a person released the parent op for resend: its steps are looked at again"},
}

// StepTransitions returns a copy of the step run's transition table.
func StepTransitions() []StepTransition { return slices.Clone(stepTransitions) }

// StepInitial is the state a step run starts in.
const StepInitial = StepRunning

// StepAllowed reports whether by may move a step run from one state to another.
func StepAllowed(from, to StepState, by Actor) bool {
	return slices.ContainsFunc(stepTransitions, func(t StepTransition) bool {
		return t.From == from && t.To == to && t.By == by
	})
}

// StepChange is a change of a composite op's step run, for ApplyStep.
type StepChange struct {
	OpID     string
	From, To StepState
	// FailedStep names the step that failed for good (on the change to compensating or
	// failed); kept on the run.
	FailedStep string
	// Detail is the event's detail (marshalled to JSON).
	Detail any
}

// ApplyStep writes c in q (the step runner's transaction): the run's state, guarded by
// c.From, and an event of kind "steps" on the parent op. A self-loop writes the event
// only. It returns false when the run is no longer in c.From.
func (m *Machine) ApplyStep(ctx context.Context, q Querier, c StepChange) (bool, error) {
	if !StepAllowed(c.From, c.To, Steps) {
		return false, fmt.Errorf("%w: step run %s -> %s by %s", ErrNotAllowed, c.From, c.To, Steps)
	}
	tag, err := q.Exec(ctx, sqlStepRunSet, c.OpID, string(c.From), string(c.To), c.FailedStep)
	if err != nil {
		return false, fmt.Errorf("step run %s -> %s: %w", c.From, c.To, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	d, err := json.Marshal(c.Detail)
	if err != nil {
		return false, fmt.Errorf("marshal step event detail: %w", err)
	}
	if _, err := q.Exec(ctx, sqlInsertEvent, c.OpID, "steps", string(c.From), string(c.To), string(Steps), d); err != nil {
		return false, fmt.Errorf("insert step event: %w", err)
	}
	return true, nil
}
