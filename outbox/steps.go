package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/steps"
	"github.com/oncebox/oncebox/vendorapi"
)

// newSteps builds the Outbox's step runner (package steps), handing it what it uses of
// the Outbox. It needs the op state machine set.
func (ob *Outbox) newSteps() error {
	r, err := steps.New(steps.Deps{
		Pool:      ob.pool,
		Ops:       ob.ops,
		EnqueueTx: ob.enqueueStepTx,
		Refused:   stepRefused,
		Logger:    ob.logger,
	})
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	ob.steps = r
	return nil
}

// enqueueStepTx enqueues a step's op for the step runner: EnqueueTx, with the key under
// steps.KeyPrefix that a caller may not use.
func (ob *Outbox) enqueueStepTx(ctx context.Context, tx pgx.Tx, p steps.EnqueueParams) error {
	_, err := ob.EnqueueTx(ctx, tx, EnqueueParams{TenantID: p.TenantID, Key: p.Key, Tool: p.Tool, Args: p.Args,
		ConversationID: p.ConversationID, ToolCallID: p.ToolCallID, step: true})
	return err
}

// stepRefused reports whether a step's enqueue was refused for good: its arguments, its
// tool, its key, an object it does not own.
func stepRefused(err error) bool {
	return errors.Is(err, vendorapi.ErrInvalidArgs) || errors.Is(err, ErrUnknownTool) || errors.Is(err, ErrKeyConflict) || errors.Is(err, ErrNotOwned)
}

// StepsOf returns the steps of the tenant's composite op op, each with its op, then
// its compensations that have an op; nil for an op of any other tool.
func (ob *Outbox) StepsOf(ctx context.Context, op *Op) ([]protocol.StepRef, error) {
	if op.Vendor != vendorapi.StepsVendor {
		return nil, nil
	}
	return steps.Refs(ctx, ob.pool, op.TenantID, op.ID)
}
