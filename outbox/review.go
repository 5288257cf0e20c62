package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/internal/storable"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// ReviewItem is one op waiting for a person's decision.
type ReviewItem struct {
	OpID     string
	Key      string
	Tool     string
	Vendor   string
	TenantID int64
	// Attempts is how many dispatch attempts the op had.
	Attempts  int
	UpdatedAt time.Time
	// LastEvent says why the op is here: its latest event's kind and decision (such as
	// "outbox: duplicate"), or the worker's error code when no event was recorded.
	LastEvent string
}

// ListReview lists the ops in needs_review of one tenant, or of every tenant when
// tenantID is 0, oldest first.
func (ob *Outbox) ListReview(ctx context.Context, tenantID int64) ([]ReviewItem, error) {
	rows, err := ob.pool.Query(ctx, sqlListReview, tenantID)
	if err != nil {
		return nil, fmt.Errorf("outbox: list review: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ReviewItem, error) {
		var it ReviewItem
		err := row.Scan(&it.OpID, &it.Key, &it.Tool, &it.Vendor, &it.TenantID, &it.Attempts, &it.UpdatedAt, &it.LastEvent)
		return it, err
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: list review: %w", err)
	}
	return items, nil
}

// AwaitsApprovalSentence says why an op that awaits approval cannot be resolved or
// released by hand, for the API's and the console's refusals.
const AwaitsApprovalSentence = "This op awaits approval, and only its approval can release it (with the approvers, " +
	"policy version, fingerprint and expiry it is bound to); it can be approved or rejected, not resolved or released."

// ErrAwaitsApproval is returned for a resolution or release of an op that awaits
// approval: only the approval decision (Outbox.Decide) moves it to pending. It
// matches ErrWrongState.
var ErrAwaitsApproval = fmt.Errorf("%w: the op awaits approval; only its approval can release it", ErrWrongState)

// manualKind is the event kind of a person's resolution.
const manualKind = "manual_resolution"

// ResolveSucceeded records that the tenant's op under key did happen at the vendor, as
// the object vendorRef (a person checked). The op must be in needs_review or unknown;
// otherwise the error matches ErrWrongState. actor and reason go into its history.
func (ob *Outbox) ResolveSucceeded(ctx context.Context, tenantID int64, key, vendorRef, reason, actor string) (*Op, error) {
	if vendorRef == "" {
		return nil, errors.New("outbox: resolve succeeded: vendorRef is required")
	}
	if err := storable.CheckText("vendor_ref", vendorRef); err != nil {
		return nil, err
	}
	return ob.resolve(ctx, tenantID, key, protocol.StatusSucceeded, opstate.Resolve, "resolved_succeeded", reason, actor,
		func(op reviewOp, c *opstate.Change, detail map[string]any) {
			c.Result, _ = json.Marshal(map[string]string{"vendor_ref": vendorRef, "resolved_by": "manual_review"})
			c.RedactedArgs, c.VendorRef = redactedArgs(ob, op), vendorRef
			detail["vendor_ref"] = vendorRef
		})
}

// ResolveFailed records that the tenant's op under key did not happen and must not be
// sent again: it becomes failed, with an error naming actor and reason. The op must be in
// needs_review or unknown; otherwise the error matches ErrWrongState.
func (ob *Outbox) ResolveFailed(ctx context.Context, tenantID int64, key, reason, actor string) (*Op, error) {
	return ob.resolve(ctx, tenantID, key, protocol.StatusFailed, opstate.Resolve, "resolved_failed", reason, actor,
		func(op reviewOp, c *opstate.Change, detail map[string]any) {
			c.Error, _ = json.Marshal(map[string]string{"class": "permanent", "code": "resolved_failed",
				"message": "marked failed by " + actor + ": " + reason})
			c.RedactedArgs = redactedArgs(ob, op)
		})
}

// ReleaseForResend sends the tenant's op under key back to pending and inserts its
// dispatch job in the same transaction: a person checked that the vendor holds nothing.
// With newKey the op moves to the next generation and a new vendor key (needed when the
// vendor still remembers the old key); an op whose vendor key is known to replay a
// stored failure gets a new key either way. The op must be in needs_review or unknown;
// otherwise the error matches ErrWrongState.
func (ob *Outbox) ReleaseForResend(ctx context.Context, tenantID int64, key, reason, actor string, newKey bool) (*Op, error) {
	return ob.resolve(ctx, tenantID, key, protocol.StatusPending, opstate.Release, "released_for_resend", reason, actor,
		func(op reviewOp, c *opstate.Change, detail map[string]any) {
			bump := newKey || op.staleKey
			detail["new_key"] = bump
			if bump {
				c.NewVendorKey = vendorapi.VendorKey(tenantID, op.key, op.tool, op.generation+1)
				detail["generation"] = op.generation + 1
			}
		})
}

// reviewOp is the locked op a manual resolution changes.
type reviewOp struct {
	id, key, tool, vendor string
	status                protocol.Status
	args                  json.RawMessage
	generation            int
	staleKey              bool
	// sealed says that the op's full args are sealed: its stored args are already
	// the redacted form.
	sealed bool
}

// redactedArgs returns the args to store once op is terminal: its redacted args when
// its tool redacts and the stored args are the full ones, nil to keep them as they are.
func redactedArgs(ob *Outbox, op reviewOp) json.RawMessage {
	tool, ok := ob.cfg.Tools.Lookup(op.tool)
	if !ok || tool.Redact == nil || op.sealed {
		return nil
	}
	return tool.Redact(op.args)
}

// resolve locks the op, checks that a person may move it to to by action (the
// transition table says from needs_review or unknown: an op that awaits approval is
// released only by the approval decision, never by a resolution), lets decide fill in
// the change, and has the op state machine write it.
func (ob *Outbox) resolve(ctx context.Context, tenantID int64, rawKey string, to protocol.Status, action opstate.Action,
	decision, reason, actor string,
	decide func(op reviewOp, c *opstate.Change, detail map[string]any)) (*Op, error) {
	key, err := protocol.NormalizeKey(rawKey)
	if err != nil {
		return nil, err
	}
	if actor == "" {
		return nil, errors.New("outbox: actor is required: name the person deciding")
	}
	for _, f := range []struct{ name, value string }{{"reason", reason}, {"actor", actor}} {
		if err := storable.CheckText(f.name, f.value); err != nil {
			return nil, err
		}
	}
	var applied *opstate.Applied
	err = pgx.BeginFunc(ctx, ob.pool, func(tx pgx.Tx) error {
		var (
			op     reviewOp
			status string
		)
		err := tx.QueryRow(ctx, sqlReviewOpForUpdate, tenantID, key).Scan(&op.id, &op.tool, &op.vendor, &status,
			&op.generation, &op.staleKey, &op.args, &op.sealed)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("lock op: %w", err)
		}
		op.key = key
		op.status = protocol.Status(status)
		if op.status == protocol.StatusAwaitingApproval {
			return ErrAwaitsApproval
		}
		if !opstate.Allowed(op.status, to, opstate.Person, action) {
			return fmt.Errorf("%w: op is %s; only an op in %s or %s can be resolved by hand",
				ErrWrongState, op.status, protocol.StatusNeedsReview, protocol.StatusUnknown)
		}
		c := opstate.Change{OpID: op.id, From: op.status, To: to, By: opstate.Person, Action: action, Actor: actor, Kind: manualKind,
			Attrs: []any{slog.String("decision", decision)}}
		detail := map[string]any{"decision": decision, "reason": reason}
		c.Detail = detail
		decide(op, &c, detail)
		applied, err = ob.ops.Apply(ctx, tx, c)
		if err != nil {
			return fmt.Errorf("%s: %w", decision, err)
		}
		if applied == nil {
			return fmt.Errorf("%s: op %s changed while locked", decision, op.id)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrWrongState) {
			return nil, err
		}
		return nil, fmt.Errorf("outbox: %s: %w", decision, err)
	}
	applied.Report()
	return ob.Get(ctx, tenantID, key)
}
