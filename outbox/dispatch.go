package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/dispatch"
)

// newDispatcher builds the Outbox's dispatcher (package dispatch) from its Config,
// handing it what it uses of the Outbox. It needs the op state machine, the vendors,
// the sealer, the accounts and the reconciler set; the River client it inserts with is
// read when a job is inserted, once New has set it.
func (ob *Outbox) newDispatcher() error {
	c := &ob.cfg
	d, err := dispatch.New(dispatch.Config{
		ClientID:          c.ClientID,
		Work:              *c.Work,
		ClaimCommit:       c.ClaimCommit,
		MixedVersions:     c.MixedVersions,
		BatchedCompletion: *c.BatchedCompletion,
		MaxAttempts:       c.MaxAttempts,
		RetryBackoff:      c.RetryBackoff,
	}, dispatch.Deps{
		Pool:       ob.pool,
		Ops:        ob.ops,
		Vendors:    ob.vendors,
		JobTimeout: ob.jobTimeout,
		Tools:      c.Tools,
		Sealed:     ob.sealer,
		Accounts:   ob.accounts,
		HandOverTx: func(ctx context.Context, tx pgx.Tx) error {
			return ob.reconciler.HandOverTx(ctx, tx, ob.river)
		},
		InsertJobTx: func(ctx context.Context, tx pgx.Tx, opID, vendor string) error {
			return ob.insertJobTx(ctx, tx, &Op{ID: opID, Vendor: vendor})
		},
		Observer: c.Observer,
		Logger:   ob.logger,
		Tracer:   ob.tracer,
	})
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	ob.dispatcher = d
	return nil
}
