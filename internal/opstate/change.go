package opstate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/protocol"
)

// Change is a decision about one op, taken by the reconciler or a person, for Apply to
// write: the op's new status, what it records, and the event that explains it.
type Change struct {
	OpID     string
	From, To protocol.Status
	By       Actor
	// Action is a person's action (approve, reject, resolve, release): the transition
	// table gives each of a person's transitions to one action. Empty for other actors.
	Action Action
	// Actor is the name recorded on the event (a person's); defaults to By.
	Actor string
	// Kind and Detail are the event's (Detail is marshalled to JSON).
	Kind   string
	Detail any

	// Result, Error and VendorRef are a terminal op's outcome. A VendorRef set by a
	// person's resolution (Action Resolve) is stored as typed: it never makes the object
	// the tenant's (outbox's ownership check).
	Result    json.RawMessage
	Error     json.RawMessage
	VendorRef string
	// RedactedArgs replace a terminal op's stored args when set.
	RedactedArgs json.RawMessage
	// NewVendorKey, for a change to pending, moves the op to its next generation under
	// this vendor key.
	NewVendorKey string
	// NextCheck, for an unknown op that stays unknown, is when to look again.
	NextCheck time.Time
	// DispatchStartedAt, for a stuck dispatching op, is the start of the stuck attempt:
	// the change applies only if it is still that attempt and no dispatch job runs.
	DispatchStartedAt time.Time
	// Unheard, for a pending op whose dispatch job is gone (rejob, or to needs_review),
	// says that the job may have called the vendor without its answer being recorded:
	// the op's next runs then treat it as possibly sent (migration 016).
	Unheard bool

	// Attrs are added to the log line; Message and Level replace "op state changed"
	// at Info.
	Attrs   []any
	Message string
	Level   slog.Level
}

// Apply writes c in tx: the op's row (guarded by c.From), the event, and, for a change
// to pending, the op's dispatch job. It returns nil, nil when the op is no longer in
// c.From. Report the result after the commit.
func (m *Machine) Apply(ctx context.Context, tx pgx.Tx, c Change) (*Applied, error) {
	actor := c.Actor
	s := &step{from: []protocol.Status{c.From}, to: c.To, by: c.By, action: c.Action, ident: Ident{ID: c.OpID},
		event: &event{kind: c.Kind, actor: actor, detail: c.Detail}, attrs: c.Attrs, msg: c.Message, level: c.Level}
	a, err := m.transition(ctx, tx, s, func(dropSealed bool) (bool, error) {
		var row pgx.Row
		switch {
		case c.To.Terminal():
			row = tx.QueryRow(ctx, sqlSettle, c.OpID, c.From, c.To, nullJSON(c.Result), nullJSON(c.Error),
				nullJSON(c.RedactedArgs), c.VendorRef, dropSealed, c.Action == Resolve)
		case c.To == protocol.StatusPending && c.From == protocol.StatusPending:
			row = tx.QueryRow(ctx, sqlRejob, c.OpID, c.From, c.Unheard)
		case c.To == protocol.StatusPending:
			row = tx.QueryRow(ctx, sqlRelease, c.OpID, c.From, c.NewVendorKey != "", c.NewVendorKey, c.By == Reconciler)
		case c.To == protocol.StatusNeedsReview:
			row = tx.QueryRow(ctx, sqlToReview, c.OpID, c.From, c.Unheard)
		case c.To == protocol.StatusAwaitingApproval && c.From == protocol.StatusAwaitingApproval:
			row = tx.QueryRow(ctx, sqlStays, c.OpID, c.From)
		case c.To == protocol.StatusUnknown && c.From == protocol.StatusUnknown:
			row = tx.QueryRow(ctx, sqlCheckLater, c.OpID, c.From, nullTime(c.NextCheck))
		case c.To == protocol.StatusUnknown && c.By == Reconciler:
			row = tx.QueryRow(ctx, sqlMarkStuck, c.OpID, c.From, c.DispatchStartedAt)
		case c.To == protocol.StatusUnknown:
			row = tx.QueryRow(ctx, sqlHandOver, c.OpID, c.From)
		default:
			return false, fmt.Errorf("%w: no write for %s -> %s", ErrNotAllowed, c.From, c.To)
		}
		ok, err := scanIdent(row, &s.ident)
		if err != nil || !ok {
			return ok, err
		}
		if c.To == protocol.StatusPending {
			if m.cfg.InsertJob == nil {
				return false, fmt.Errorf("opstate: no InsertJob configured for a change to %s", protocol.StatusPending)
			}
			if err := m.cfg.InsertJob(ctx, tx, c.OpID, s.ident.Vendor); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s -> %s: %w", c.From, c.To, err)
	}
	return a, nil
}

// Hold gives the new op opID, inserted pending in tx by the enqueue, its first status:
// awaiting_approval (the table's initial row by Gate), with the event (kind "held",
// detail), the metric (from "") and the log line of any transition. Report it once tx
// committed. It returns nil, nil when the op is not pending.
func (m *Machine) Hold(ctx context.Context, tx pgx.Tx, opID string, detail any) (*Applied, error) {
	s := &step{from: []protocol.Status{""}, to: protocol.StatusAwaitingApproval, by: Gate, ident: Ident{ID: opID},
		event: &event{kind: "held", detail: detail}, msg: "op held for a person"}
	a, err := m.transition(ctx, tx, s, func(bool) (bool, error) {
		return scanIdent(tx.QueryRow(ctx, sqlHold, opID), &s.ident)
	})
	if err != nil {
		return nil, fmt.Errorf("hold for approval: %w", err)
	}
	return a, nil
}

// ApplyTx is Apply in a transaction of its own, reported once committed.
func (m *Machine) ApplyTx(ctx context.Context, c Change) (*Applied, error) {
	return m.withTx(ctx, func(tx pgx.Tx) (*Applied, error) { return m.Apply(ctx, tx, c) })
}

// LeaseUnknown picks at most batch unknown ops due for a check at now and leases them
// until lease (their next check moves there), so that a concurrent sweep in another
// process skips them; the decision then sets the real next check.
func (m *Machine) LeaseUnknown(ctx context.Context, now time.Time, batch int, lease time.Time) ([]string, error) {
	rows, err := m.cfg.Pool.Query(ctx, sqlLeaseUnknown, now, batch, lease)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// CheckSoon makes the unknown ops among ids (uuids) due for a check now, whatever check
// time an earlier decision set: new evidence (a vendor event) arrived for them. It
// changes no status. An op a running sweep holds may then be checked twice at once,
// which is harmless: each decision is recorded only if the op is still unknown under
// the same attempt token.
func (m *Machine) CheckSoon(ctx context.Context, ids []string) error {
	_, err := m.cfg.Pool.Exec(ctx, sqlCheckSoon, ids)
	return err
}

// PurgeResult says what one purge did.
type PurgeResult struct {
	Ops, Batches, Tombstones int
	// Deferred counts the ops looked at and not deleted: their expires_at passed but not
	// their expiry (they settled late, or are not terminal), so it moved to the earliest
	// time they may go.
	Deferred int
}

// Purge deletes expired ops in the statuses the table lets the purge take (terminal
// ones), batch at a time, leaving a tombstone for each that lives tombstoneTTL, and
// deletes tombstones past their own TTL. Each batch looks at up to batch ops whose
// expires_at passed (sqlPurgeBatch); the purge goes on while a batch looks at a full one.
func (m *Machine) Purge(ctx context.Context, batch int, tombstoneTTL time.Duration) (PurgeResult, error) {
	var r PurgeResult
	from := sources(Purged, Purge)
	for {
		var seen, deleted int
		err := m.cfg.Pool.QueryRow(ctx, sqlPurgeBatch, batch, tombstoneTTL.Seconds(), from).Scan(&seen, &deleted)
		if err != nil {
			return r, fmt.Errorf("purge expired ops: %w", err)
		}
		if seen == 0 {
			break
		}
		r.Ops += deleted
		r.Deferred += seen - deleted
		r.Batches++
		if seen < batch {
			break
		}
	}
	tag, err := m.cfg.Pool.Exec(ctx, sqlPurgeTombstones)
	if err != nil {
		return r, fmt.Errorf("purge tombstones: %w", err)
	}
	r.Tombstones = int(tag.RowsAffected())
	return r, nil
}
