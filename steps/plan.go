package steps

import (
	"encoding/json"
	"fmt"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// stepOp is what the planner knows of a step's op (nil: none under its key yet).
type stepOp struct {
	ID        string
	Key       string
	Status    protocol.Status
	VendorRef string
	Result    json.RawMessage
}

// stepCall is an op the runner is to enqueue now.
type stepCall struct {
	Step string
	Key  string
	Tool string
	Args json.RawMessage
}

// stepPlan is what the runner does on one run: move the run to To (To equal to the
// state it is in when nothing changes), enqueue Enqueue, or wait for the steps' ops.
type stepPlan struct {
	To      opstate.StepState
	Enqueue *stepCall
	// FailedStep is the step that failed for good (to compensating, failed).
	FailedStep string
	// Why says why, for the event and the parent's error.
	Why string
}

// stepInput is everything a plan is made from: no I/O, so planSteps has table tests.
type stepInput struct {
	ParentID string
	Steps    []vendorapi.Step
	Args     json.RawMessage
	State    opstate.StepState
	// FailedStep is the run's failed step (in compensating).
	FailedStep string
	// Ops are the steps' and compensations' ops, by key.
	Ops map[string]*stepOp
	// Refused are keys whose enqueue was refused for good in this run, with why.
	Refused map[string]string
	// Purged are keys whose op was purged (a tombstone): whether it was done is not
	// known here, so it is never enqueued again and never counted as not done.
	Purged map[string]bool
}

// planSteps decides the run's next move (docs/steps.md): steps in order, each once its
// predecessor succeeded or was skipped; a required step that fails for good (refused,
// failed, rejected) starts the compensations of the steps done before it, in reverse
// order; an op in needs_review sends the run there.
func planSteps(in stepInput) stepPlan {
	doc := stepDoc(in)
	if in.State == opstate.StepCompensating {
		return planCompensations(in, doc, indexOf(in.Steps, in.FailedStep), in.FailedStep, "")
	}
	for i, s := range in.Steps {
		key := Key(in.ParentID, s.Name)
		if why, refused := in.Refused[key]; refused {
			return planFailure(in, doc, i, fmt.Sprintf("step %s was refused: %s", s.Name, why))
		}
		op := in.Ops[key]
		if op == nil && in.Purged[key] {
			return stepPlan{To: opstate.StepNeedsReview, Why: purgedWhy("step " + s.Name)}
		}
		if op == nil {
			if s.When != "" && !truthy(doc, s.When) {
				continue
			}
			args, err := fillArgs(s.Args, doc)
			if err != nil {
				return planFailure(in, doc, i, fmt.Sprintf("step %s: %v", s.Name, err))
			}
			return stepPlan{To: in.State, Enqueue: &stepCall{Step: s.Name, Key: key, Tool: s.Tool, Args: args}}
		}
		switch op.Status {
		case protocol.StatusSucceeded:
			continue
		case protocol.StatusFailed, protocol.StatusRejected:
			return planFailure(in, doc, i, fmt.Sprintf("step %s %s", s.Name, op.Status))
		case protocol.StatusNeedsReview:
			return stepPlan{To: opstate.StepNeedsReview, Why: fmt.Sprintf("step %s needs review", s.Name)}
		default:
			return stepPlan{To: in.State}
		}
	}
	return stepPlan{To: opstate.StepSucceeded, Why: "every step done"}
}

// planFailure is the plan once step i failed for good: its done predecessors'
// compensations, or failed when none declares one.
func planFailure(in stepInput, doc map[string]any, i int, why string) stepPlan {
	p := planCompensations(in, doc, i, in.Steps[i].Name, why)
	if p.To == opstate.StepCompensated {
		return stepPlan{To: opstate.StepFailed, FailedStep: in.Steps[i].Name, Why: why}
	}
	p.FailedStep, p.Why = in.Steps[i].Name, why
	if p.To == opstate.StepNeedsReview {
		return p
	}
	p.To = opstate.StepCompensating
	return p
}

// planCompensations walks the compensations of the steps before failed (index i), last
// first: each once the one after it succeeded. It returns compensated when all did (or
// there were none).
func planCompensations(in stepInput, doc map[string]any, i int, failed, why string) stepPlan {
	for j := i - 1; j >= 0; j-- {
		s := in.Steps[j]
		if s.Compensate != nil && in.Ops[Key(in.ParentID, s.Name)] == nil && in.Purged[Key(in.ParentID, s.Name)] {
			return stepPlan{To: opstate.StepNeedsReview, Why: purgedWhy("step " + s.Name)}
		}
		if s.Compensate == nil || !succeeded(in.Ops[Key(in.ParentID, s.Name)]) {
			continue
		}
		key := CompensationKey(in.ParentID, s.Name)
		if in.Ops[key] == nil && in.Purged[key] {
			return stepPlan{To: opstate.StepNeedsReview, Why: purgedWhy("the compensation of step " + s.Name)}
		}
		if r, refused := in.Refused[key]; refused {
			return stepPlan{To: opstate.StepNeedsReview, Why: fmt.Sprintf("the compensation of step %s was refused: %s", s.Name, r)}
		}
		op := in.Ops[key]
		if op == nil {
			args, err := fillArgs(s.Compensate.Args, doc)
			if err != nil {
				return stepPlan{To: opstate.StepNeedsReview, Why: fmt.Sprintf("the compensation of step %s: %v", s.Name, err)}
			}
			return stepPlan{To: opstate.StepCompensating, Enqueue: &stepCall{Step: "undo." + s.Name, Key: key, Tool: s.Compensate.Tool, Args: args}}
		}
		switch op.Status {
		case protocol.StatusSucceeded:
			continue
		case protocol.StatusFailed, protocol.StatusRejected, protocol.StatusNeedsReview:
			return stepPlan{To: opstate.StepNeedsReview, Why: fmt.Sprintf("the compensation of step %s is %s", s.Name, op.Status)}
		default:
			return stepPlan{To: opstate.StepCompensating}
		}
	}
	if why == "" {
		why = fmt.Sprintf("step %s failed; every compensation done", failed)
	}
	return stepPlan{To: opstate.StepCompensated, Why: why}
}

// stepDoc is the document $from and when pointers read: the call's arguments and the
// steps' ops so far.
func stepDoc(in stepInput) map[string]any {
	var call any
	_ = json.Unmarshal(in.Args, &call)
	steps := map[string]any{}
	for _, s := range in.Steps {
		op := in.Ops[Key(in.ParentID, s.Name)]
		if op == nil {
			continue
		}
		var result any
		if len(op.Result) > 0 {
			_ = json.Unmarshal(op.Result, &result)
		}
		steps[s.Name] = map[string]any{"op_id": op.ID, "status": string(op.Status), "vendor_ref": op.VendorRef, "result": result}
	}
	return map[string]any{"call": call, "steps": steps}
}

// purgedWhy says why a run whose step's op was purged waits for a person.
func purgedWhy(what string) string {
	return what + "'s op was purged before the run ended: whether it was done is not known here, " +
		"so it is not sent again; a person decides (resolve the composite op)"
}

func succeeded(op *stepOp) bool { return op != nil && op.Status == protocol.StatusSucceeded }

func indexOf(steps []vendorapi.Step, name string) int {
	for i, s := range steps {
		if s.Name == name {
			return i
		}
	}
	return len(steps)
}
