package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// StepNotRun is the status a StepRef shows for a step that has no op (yet, or at all:
// skipped by its when, refused, or after a failure).
const StepNotRun = "not_run"

// StepsOf returns the steps of the tenant's composite op op, each with its op, then
// its compensations that have an op; nil for an op of any other tool.
func (ob *Outbox) StepsOf(ctx context.Context, op *Op) ([]protocol.StepRef, error) {
	if op.Vendor != vendorapi.StepsVendor {
		return nil, nil
	}
	return ob.stepRefs(ctx, ob.pool, op)
}

func (ob *Outbox) stepRefs(ctx context.Context, q Querier, parent *Op) ([]protocol.StepRef, error) {
	var def []byte
	var state, failed string
	if err := q.QueryRow(ctx, sqlParentSteps, parent.ID).Scan(&def, &state, &failed); err != nil {
		return nil, fmt.Errorf("outbox: read composite op's steps: %w", err)
	}
	var steps []vendorapi.Step
	if err := json.Unmarshal(def, &steps); err != nil {
		return nil, fmt.Errorf("outbox: the steps stored with composite op %s are not readable: %w", parent.ID, err)
	}
	ops, err := stepOps(ctx, q, parent)
	if err != nil {
		return nil, err
	}
	refs := make([]protocol.StepRef, 0, len(steps))
	ref := func(name, key string) protocol.StepRef {
		r := protocol.StepRef{Name: name, Key: key, Status: StepNotRun}
		if op := ops[key]; op != nil {
			r.OpID, r.Status = op.ID, string(op.Status)
		}
		return r
	}
	for _, s := range steps {
		refs = append(refs, ref(s.Name, StepKey(parent.ID, s.Name)))
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if key := CompensationKey(parent.ID, steps[i].Name); ops[key] != nil {
			refs = append(refs, ref("undo."+steps[i].Name, key))
		}
	}
	return refs, nil
}
