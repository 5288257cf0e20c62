package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Find returns the tenant's ops, newest first and at most limit, that term names: its
// idempotency key, its op id, its vendor reference (pi_…, re_…, a SendGrid message id)
// or its conversation id, or another vendor id of its object (Tool.RefAliases: a
// payment's charge, ch_…). It is support's search, for `oncebox lookup` and the
// console's.
func (ob *Outbox) Find(ctx context.Context, tenantID int64, term string, limit int) ([]*Op, error) {
	rows, err := ob.pool.Query(ctx, sqlFindKeys, tenantID, term, limit, ob.cfg.Tools.aliases())
	if err != nil {
		return nil, fmt.Errorf("outbox: find ops: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("outbox: find ops: %w", err)
	}
	ops := make([]*Op, 0, len(keys))
	for _, k := range keys {
		op, err := ob.Get(ctx, tenantID, k)
		if errors.Is(err, ErrNotFound) {
			continue // purged in between
		}
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}
