package outbox

import (
	"context"
	"fmt"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
)

// newReconciler builds the Outbox's reconciler from Config.Reconcile, handing it what it
// uses of the Outbox. It needs the op state machine, the vendors and the accounts set.
func (ob *Outbox) newReconciler() error {
	r, err := reconcile.New(ob.cfg.Reconcile, reconcile.Deps{
		Pool:       ob.pool,
		Ops:        ob.ops,
		Vendors:    ob.vendors,
		JobTimeout: ob.jobTimeout,
		Accounts:   ob.accounts,
		Tools:      ob.cfg.Tools,
		Logger:     ob.logger,
	})
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	ob.reconciler = r
	return nil
}

// ReconcileOnce runs one sweep of the reconciler (reconcile.Reconciler.Sweep): it moves
// stuck dispatching ops to unknown, then looks up at most Config.Reconcile.BatchSize
// unknown ops that are due and records a decision for each. An error about one op does
// not stop the others; the errors are returned together.
func (ob *Outbox) ReconcileOnce(ctx context.Context) (reconcile.Stats, error) {
	return ob.reconciler.Sweep(ctx)
}

// CheckSoon makes the unknown ops among opIDs due for the next sweep, whatever check
// time an earlier decision set: new evidence (a vendor event) arrived for them. Ids that
// are not uuids are skipped; ops in any other status are left alone.
func (ob *Outbox) CheckSoon(ctx context.Context, opIDs []string) error {
	ids := make([]string, 0, len(opIDs))
	for _, id := range opIDs {
		if protocol.IsOpID(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if err := ob.ops.CheckSoon(ctx, ids); err != nil {
		return fmt.Errorf("outbox: check soon: %w", err)
	}
	return nil
}
