package steps

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// TestPlanStepsNeverRedoesOrSkipsAPurgedStep (issue 42, item 1): a step whose op was
// purged (a tombstone under its key) is neither enqueued again nor taken as not done:
// the run goes to needs_review with a sentence, running or compensating alike, and so
// does a run whose purged op is a compensation.
func TestPlanStepsNeverRedoesOrSkipsAPurgedStep(t *testing.T) {
	t.Parallel()
	const parent = "00000000-0000-4000-8000-000000000001"
	steps := []vendorapi.Step{
		{Name: "charge", Tool: "pay.charge", Compensate: &vendorapi.StepCall{Tool: "pay.refund", Args: json.RawMessage(`{}`)}},
		{Name: "wipe", Tool: "crm.wipe"},
	}
	done := func(key string) *stepOp { return &stepOp{ID: key, Key: key, Status: protocol.StatusSucceeded} }
	charge, undo, wipe := Key(parent, "charge"), CompensationKey(parent, "charge"), Key(parent, "wipe")
	for _, c := range []struct {
		name   string
		state  opstate.StepState
		failed string
		ops    map[string]*stepOp
		purged map[string]bool
	}{
		{"running, the first step purged", opstate.StepRunning, "", map[string]*stepOp{}, map[string]bool{charge: true}},
		{"running, a later step purged", opstate.StepRunning, "", map[string]*stepOp{charge: done(charge)}, map[string]bool{wipe: true}},
		{"compensating, the step to undo purged", opstate.StepCompensating, "wipe", map[string]*stepOp{}, map[string]bool{charge: true}},
		{"compensating, the compensation purged", opstate.StepCompensating, "wipe", map[string]*stepOp{charge: done(charge)}, map[string]bool{undo: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := planSteps(stepInput{ParentID: parent, Steps: steps, Args: json.RawMessage(`{}`), State: c.state,
				FailedStep: c.failed, Ops: c.ops, Refused: map[string]string{}, Purged: c.purged})
			require.Nil(t, p.Enqueue, "nothing is enqueued again")
			require.Equal(t, opstate.StepNeedsReview, p.To)
			require.Contains(t, p.Why, "was purged before the run ended")
		})
	}
	// Without tombstones, the same inputs enqueue the step (or finish): the cases above
	// differ only by the purge.
	p := planSteps(stepInput{ParentID: parent, Steps: steps, Args: json.RawMessage(`{}`), State: opstate.StepRunning,
		Ops: map[string]*stepOp{}, Refused: map[string]string{}})
	require.NotNil(t, p.Enqueue)
	require.Equal(t, charge, p.Enqueue.Key)
}
