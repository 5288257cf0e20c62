package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// admit checks that the objects the op just inserted names are the tenant's, asks the
// gate about it, once, and then inserts its dispatch job, or makes it wait for a person,
// or removes it again when either refuses it.
func (ob *Outbox) admit(ctx context.Context, tx pgx.Tx, p *Prepared, ins *insertion, batch *jobBatch) (*EnqueueResult, error) {
	op := ins.op
	var admission Admission
	ctx, err := ob.withOpAccount(ctx, op, p.Tool)
	if err == nil {
		err = ob.checkObjects(ctx, tx, p, op)
	}
	if err == nil {
		admission, err = ob.cfg.Gate.Admit(ctx, tx, GateOp{Op: op, Tool: ob.gateTool(p.Tool), Args: p.Args, TokenID: p.params.TokenID,
			SessionConversation: p.params.SessionConversation,
			PolicyVersion:       ins.policyVersion, BudgetVersion: ins.budgetVersion,
			InstallationVersion: ins.installationVersion})
	}
	if err != nil {
		// A refusal records nothing, in the caller's transaction too.
		if _, delErr := tx.Exec(ctx, sqlDeleteRefusedOp, op.ID); delErr != nil {
			return nil, errors.Join(err, fmt.Errorf("outbox: remove refused op: %w", delErr))
		}
		return nil, &admissionRefusal{err: err}
	}
	res := &EnqueueResult{Op: op, ExpiryCollision: ins.tombstone != nil}
	if admission.Hold == nil {
		return res, ob.addJobTx(ctx, tx, op, batch)
	}
	res.Why = admission.Hold.Why
	return res, ob.holdTx(ctx, tx, res, op, p, admission.Hold)
}

// withOpAccount returns ctx carrying the vendor account the new op was accepted under
// (WithAccount), for the vendor reads of the tool's ObjectArg.Tag and Price. An own key
// is opened only for a tool that may read.
func (ob *Outbox) withOpAccount(ctx context.Context, op *Op, tool vendorapi.Tool) (context.Context, error) {
	if op.VendorAccount == "" || (len(tool.Objects) == 0 && tool.Price == nil) {
		return vendorapi.WithAccount(ctx, vendorapi.Account{Ref: op.VendorAccount}), nil
	}
	acct, err := ob.accounts.Account(ctx, op.TenantID, op.Vendor, op.VendorAccount)
	if err != nil {
		return ctx, err
	}
	return vendorapi.WithAccount(ctx, acct), nil
}

// holdTx makes a new op wait for a person: its status, its approval request and its
// notification.
func (ob *Outbox) holdTx(ctx context.Context, tx pgx.Tx, res *EnqueueResult, op *Op, p *Prepared, h *Hold) error {
	held, err := ob.ops.Hold(ctx, tx, op.ID, map[string]string{"why": h.Why})
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if held == nil {
		return fmt.Errorf("outbox: hold op for approval: op %s is no longer pending", op.ID)
	}
	res.held = held
	op.Status = protocol.StatusAwaitingApproval
	if err := ob.requestApprovalTx(ctx, tx, op, h, p.params.TokenID); err != nil {
		return err
	}
	return ob.notifyTx(ctx, tx, op, p.Tool, p.Args, h.Why)
}
