package steps

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// NotRun is the status a StepRef shows for a step that has no op (yet, or at all:
// skipped by its when, refused, or after a failure).
const NotRun = "not_run"

// Querier is what Refs reads with: a pool, or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Refs returns the steps of the tenant's composite op parentID, each with its op, then
// its compensations that have an op, reading with q.
func Refs(ctx context.Context, q Querier, tenantID int64, parentID string) ([]protocol.StepRef, error) {
	var def []byte
	var state, failed string
	if err := q.QueryRow(ctx, sqlParentSteps, parentID).Scan(&def, &state, &failed); err != nil {
		return nil, fmt.Errorf("steps: read composite op's steps: %w", err)
	}
	var steps []vendorapi.Step
	if err := json.Unmarshal(def, &steps); err != nil {
		return nil, fmt.Errorf("steps: the steps stored with composite op %s are not readable: %w", parentID, err)
	}
	ops, err := stepOps(ctx, q, tenantID, parentID)
	if err != nil {
		return nil, err
	}
	refs := make([]protocol.StepRef, 0, len(steps))
	ref := func(name, key string) protocol.StepRef {
		r := protocol.StepRef{Name: name, Key: key, Status: NotRun}
		if op := ops[key]; op != nil {
			r.OpID, r.Status = op.ID, string(op.Status)
		}
		return r
	}
	for _, s := range steps {
		refs = append(refs, ref(s.Name, Key(parentID, s.Name)))
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if key := CompensationKey(parentID, steps[i].Name); ops[key] != nil {
			refs = append(refs, ref("undo."+steps[i].Name, key))
		}
	}
	return refs, nil
}
