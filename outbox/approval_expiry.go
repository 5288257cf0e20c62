package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/protocol"
)

// expireTx rejects a locked op whose wait for approval ran out.
func (ob *Outbox) expireTx(ctx context.Context, tx pgx.Tx, op *Op, sealed bool, a *approvalRow) (*opstate.Applied, error) {
	msg := "approval expired: nobody decided between " + a.requestedAt.UTC().Format(time.RFC3339) +
		" and " + a.expiresAt.UTC().Format(time.RFC3339)
	errJSON, _ := json.Marshal(map[string]string{"class": "rejected", "code": "approval_expired", "message": msg})
	return ob.settleRejected(ctx, tx, op, sealed, opstate.Expiry, "", "approval_expired",
		map[string]any{"reason": "approval expired", "expired_at": a.expiresAt}, errJSON, "expired")
}

// expireIfDue rejects op when it awaits approval past its expiry, and returns it as it
// then stands. Reads (Get, a replayed enqueue) call it, so that an agent sees the expiry
// on its next read even before the periodic sweep.
func (ob *Outbox) expireIfDue(ctx context.Context, op *Op) (*Op, error) {
	if op.Status != protocol.StatusAwaitingApproval {
		return op, nil
	}
	var (
		out     *Op
		applied *opstate.Applied
	)
	err := pgx.BeginFunc(ctx, ob.pool, func(tx pgx.Tx) error {
		var err error
		out, applied, err = ob.expireIfDueTx(ctx, tx, op.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: expire approval: %w", err)
	}
	applied.Report()
	if out == nil {
		return op, nil
	}
	return out, nil
}

// expireIfDueTx locks the op with id and rejects it when its wait has run out. It
// returns the op as it stands (nil when gone) and the transition, when it expired now
// (report it once committed).
func (ob *Outbox) expireIfDueTx(ctx context.Context, tx pgx.Tx, id string) (*Op, *opstate.Applied, error) {
	op := &Op{}
	var sealed bool
	if err := tx.QueryRow(ctx, sqlOpByIDForDecision, id).Scan(append(op.scanDest(), &sealed)...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	op.fromScan()
	if op.Status != protocol.StatusAwaitingApproval {
		return op, nil, nil
	}
	a, err := readApproval(ctx, tx, op.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return op, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if a.decision != nil || !a.expired {
		return op, nil, nil
	}
	applied, err := ob.expireTx(ctx, tx, op, sealed, a)
	if err != nil {
		return nil, nil, err
	}
	if applied != nil {
		op.UpdatedAt = time.Now()
	}
	return op, applied, nil
}

// ExpireApprovals rejects, in batches, every op whose wait for approval ran out, and
// returns how many. The TTL purge job runs it.
func (ob *Outbox) ExpireApprovals(ctx context.Context) (int, error) {
	total := 0
	for {
		rows, err := ob.pool.Query(ctx, sqlDueApprovals, 100)
		if err != nil {
			return total, fmt.Errorf("outbox: find expired approvals: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return total, fmt.Errorf("outbox: find expired approvals: %w", err)
		}
		n := 0
		for _, id := range ids {
			var applied *opstate.Applied
			err := pgx.BeginFunc(ctx, ob.pool, func(tx pgx.Tx) error {
				var err error
				_, applied, err = ob.expireIfDueTx(ctx, tx, id)
				return err
			})
			if err != nil {
				return total, fmt.Errorf("outbox: expire approval of op %s: %w", id, err)
			}
			if applied != nil {
				applied.Report()
				n++
			}
		}
		total += n
		if len(ids) < 100 || n == 0 {
			return total, nil
		}
	}
}
