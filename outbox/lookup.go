package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncebox/oncebox/protocol"
)

// Get returns the tenant's op stored under key. A key of another tenant is ErrNotFound,
// exactly as a key that does not exist.
func (ob *Outbox) Get(ctx context.Context, tenantID int64, key string) (*Op, error) {
	k, err := protocol.NormalizeKey(key)
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
	if op.Steps, err = ob.StepsOf(ctx, op); err != nil {
		return nil, err
	}
	return ob.expireIfDue(ctx, op)
}

// GetByID returns the tenant's op with the given id (not key). An id of another
// tenant is ErrNotFound, exactly as an id that does not exist.
func (ob *Outbox) GetByID(ctx context.Context, tenantID int64, id string) (*Op, error) {
	op, err := ob.getByID(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if op.Steps, err = ob.StepsOf(ctx, op); err != nil {
		return nil, err
	}
	return ob.expireIfDue(ctx, op)
}

// getByID returns the tenant's op with the given id.
func (ob *Outbox) getByID(ctx context.Context, tenantID int64, id string) (*Op, error) {
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

// History is everything support needs about an op: every dispatch attempt, every
// recorded decision, and every call matched to it by its tool's identity fields.
type History struct {
	Attempts []Attempt
	Events   []Event
	Matches  []IdentityMatch
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
	if h.Matches, err = ob.IdentityMatches(ctx, tenantID, opID); err != nil {
		return nil, err
	}
	return h, nil
}
