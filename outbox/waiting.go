package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Waiting is an op that awaits a person's decision, for GET /v1/approvals.
type Waiting struct {
	Op *Op
	// Why says in one sentence why the op waits.
	Why           string
	PolicyVersion string
	// Approvals is how many distinct approvals it has, of ApproversNeeded.
	Approvals, ApproversNeeded int
	RequestedAt, ExpiresAt     time.Time
	// RequestedByToken is the id of the API token that asked (0: none recorded).
	RequestedByToken int64
	// Amount and Currency are the op's, when its tool has an amount (HasAmount); a
	// refund's currency is its payment's, when oncebox made that payment.
	Amount    int64
	Currency  string
	HasAmount bool
	// Payment is the payment a refund gives money back from (Tool.RefundOf); nil for
	// an op that refunds nothing.
	Payment *Payment
}

// ListWaiting returns the tenant's ops that await approval, oldest first, at most
// limit of them, with their arguments in redacted form (tools with Redact). An op whose
// wait ran out is left out (the next read or sweep rejects it).
func (ob *Outbox) ListWaiting(ctx context.Context, tenantID int64, limit int) ([]Waiting, error) {
	rows, err := ob.pool.Query(ctx, sqlListWaiting, tenantID, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: list approvals: %w", err)
	}
	defer rows.Close()
	var out []Waiting
	for rows.Next() {
		w := Waiting{Op: &Op{}}
		var sealed bool
		dest := append(w.Op.scanDest(), &sealed, &w.Why, &w.PolicyVersion, &w.ApproversNeeded, &w.RequestedAt, &w.ExpiresAt,
			&w.Approvals, &w.RequestedByToken)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("outbox: list approvals: %w", err)
		}
		w.Op.fromScan()
		if tool, ok := ob.cfg.Tools.Lookup(w.Op.Tool); ok {
			if tool.Amount != nil {
				w.Amount, w.Currency, w.HasAmount = tool.Amount(w.Op.Args)
			}
			// Stored args are the redacted form when sealed; redact full ones for display.
			if tool.Redact != nil && !sealed {
				w.Op.Args = tool.Redact(w.Op.Args)
			}
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: list approvals: %w", err)
	}
	rows.Close()
	for i := range out {
		if err := ob.addPayment(ctx, tenantID, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// addPayment sets the payment a waiting refund gives money back from, and its
// currency as the refund's.
func (ob *Outbox) addPayment(ctx context.Context, tenantID int64, w *Waiting) error {
	tool, ok := ob.cfg.Tools.Lookup(w.Op.Tool)
	if !ok || tool.RefundOf == "" {
		return nil
	}
	p, err := paymentOf(ctx, ob.pool, ob.cfg.Tools, tenantID, tool, w.Op.Args)
	if err != nil {
		return err
	}
	w.Payment = p
	if w.Currency == "" {
		w.Currency = p.Currency
	}
	return nil
}

// WaitReason returns why the tenant's op waits (or waited) for approval, or "" when it
// never did.
func (ob *Outbox) WaitReason(ctx context.Context, tenantID int64, opID string) (string, error) {
	var why string
	err := ob.pool.QueryRow(ctx, sqlWaitReason, tenantID, opID).Scan(&why)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("outbox: read approval reason: %w", err)
	}
	return why, nil
}
