package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/internal/opstate"
)

// Get returns the tenant's op stored under key. A key of another tenant is ErrNotFound,
// exactly as a key that does not exist.
func (ob *Outbox) Get(ctx context.Context, tenantID int64, key string) (*Op, error) {
	k, err := NormalizeKey(key)
	if err != nil {
		return nil, err
	}
	op, err := scanOp(ob.pool.QueryRow(ctx, sqlOpByKey, tenantID, k))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("outbox: get op: %w", err)
	}
	return op, nil
}

// GetByID returns the tenant's op with the given id.
func (ob *Outbox) GetByID(ctx context.Context, tenantID int64, id string) (*Op, error) {
	op, err := scanOp(ob.pool.QueryRow(ctx, sqlOpByTenantID, tenantID, id))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("outbox: get op by id: %w", err)
	}
	return op, nil
}

// Wait returns the tenant's op once it is settled (terminal, needs review or awaiting
// approval), or as it stands when wait runs out or ctx is done.
func (ob *Outbox) Wait(ctx context.Context, tenantID int64, key string, wait time.Duration) (*Op, error) {
	deadline := time.Now().Add(wait)
	delay := 20 * time.Millisecond
	for {
		op, err := ob.Get(ctx, tenantID, key)
		if err != nil {
			return nil, err
		}
		if op.Status.Settled() || time.Now().Add(delay).After(deadline) {
			return op, nil
		}
		select {
		case <-ctx.Done():
			return op, nil
		case <-time.After(delay):
		}
		if delay < 250*time.Millisecond {
			delay *= 2
		}
	}
}

// History is everything support needs about an op: every dispatch attempt and every
// recorded decision.
type History struct {
	Attempts []Attempt
	Events   []Event
}

// History returns the attempts and events of the tenant's op.
func (ob *Outbox) History(ctx context.Context, tenantID int64, opID string) (*History, error) {
	h := &History{}
	rows, err := ob.pool.Query(ctx, sqlAttempts, tenantID, opID)
	if err != nil {
		return nil, fmt.Errorf("outbox: read attempts: %w", err)
	}
	for rows.Next() {
		var a Attempt
		if err := rows.Scan(&a.Attempt, &a.Token, &a.VendorKey, &a.JobID, &a.StartedAt, &a.FinishedAt,
			&a.Outcome, &a.Error, &a.VendorRef); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox: read attempts: %w", err)
		}
		h.Attempts = append(h.Attempts, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: read attempts: %w", err)
	}
	rows, err = ob.pool.Query(ctx, sqlEvents, tenantID, opID)
	if err != nil {
		return nil, fmt.Errorf("outbox: read events: %w", err)
	}
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.At, &e.Kind, &e.FromStatus, &e.ToStatus, &e.Actor, &e.Detail); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox: read events: %w", err)
		}
		h.Events = append(h.Events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: read events: %w", err)
	}
	return h, nil
}

// Approve releases an op that awaits approval: it becomes pending and its dispatch job
// is inserted in the same transaction. actor and reason are recorded in its history.
func (ob *Outbox) Approve(ctx context.Context, tenantID int64, key, actor, reason string) (*Op, error) {
	return ob.decide(ctx, tenantID, key, StatusPending, "approved", actor, reason)
}

// Reject refuses an op that awaits approval; it is never dispatched.
func (ob *Outbox) Reject(ctx context.Context, tenantID int64, key, actor, reason string) (*Op, error) {
	return ob.decide(ctx, tenantID, key, StatusRejected, "rejected", actor, reason)
}

func (ob *Outbox) decide(ctx context.Context, tenantID int64, key string, to Status, kind, actor, reason string) (*Op, error) {
	k, err := NormalizeKey(key)
	if err != nil {
		return nil, err
	}
	if err := CheckStorableText("reason", reason); err != nil {
		return nil, err
	}
	if err := CheckStorableText("actor", actor); err != nil {
		return nil, err
	}
	var (
		op      *Op
		applied *opstate.Applied
	)
	err = pgx.BeginFunc(ctx, ob.pool, func(tx pgx.Tx) error {
		cur := &Op{}
		var sealed bool
		if err := tx.QueryRow(ctx, sqlOpByKeyForUpdate, tenantID, k).Scan(append(cur.scanDest(), &sealed)...); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		cur.fromScan()
		if cur.Status != StatusAwaitingApproval {
			return fmt.Errorf("%w: op is %s, not %s", ErrWrongState, cur.Status, StatusAwaitingApproval)
		}
		change := opstate.Change{OpID: cur.ID, From: StatusAwaitingApproval, To: to, By: opstate.Person, Actor: actor,
			Kind: kind, Detail: map[string]string{"reason": reason}}
		if to == StatusRejected {
			// A rejected op is terminal: args stored in full (no seal key) are redacted as
			// the worker would (the sealed copy is dropped by the transition).
			if tool, ok := ob.cfg.Tools.Lookup(cur.Tool); ok && tool.Redact != nil && !sealed {
				change.RedactedArgs = tool.Redact(cur.Args)
			}
			change.Error, _ = json.Marshal(map[string]string{"class": "rejected", "message": "rejected by " + actor + ": " + reason})
		}
		if applied, err = ob.ops.Apply(ctx, tx, change); err != nil {
			return err
		}
		op, err = scanOp(tx.QueryRow(ctx, sqlOpByKey, tenantID, k))
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrWrongState) {
			return nil, err
		}
		return nil, fmt.Errorf("outbox: %s op: %w", kind, err)
	}
	applied.Report()
	return op, nil
}
