package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/notify"
	"github.com/oncebox/oncebox/vendorapi"
)

// Payment is what oncebox's own records say of the payment a refund gives money back
// from (Tool.RefundOf): a refund's arguments name the payment, not its currency.
type Payment struct {
	// Ref is the vendor's id of the payment the refund names (a PaymentIntent's
	// "pi_..."); empty when the refund names it otherwise (a Stripe charge).
	Ref string `json:"ref,omitempty"`
	// Known reports whether an op of the same tenant made it (its vendor ref is Ref).
	// When false, oncebox knows neither its amount nor its currency: it was made
	// outside oncebox, and the fields below are zero.
	Known bool `json:"known"`
	// Amount and Currency are the payment op's, in minor units.
	Amount   int64  `json:"amount,omitempty"`
	Currency string `json:"currency,omitempty"`
	// Refunded sums the tenant's succeeded refunds of it, in minor units. A refund
	// without an amount refunds what was left, so after one Refunded is Amount.
	Refunded int64 `json:"refunded"`
}

// Querier is what a lookup reads with: a pool, or a transaction (pgx.Tx), such as the
// enqueue's, whose own uncommitted ops it then sees.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PaymentOf returns the payment an op of tool with args, of the tenant, refunds (see
// Payment), or nil when the tool refunds nothing (no Tool.RefundOf) or is not
// registered.
func (ob *Outbox) PaymentOf(ctx context.Context, tenantID int64, tool string, args json.RawMessage) (*Payment, error) {
	return LookupPayment(ctx, ob.pool, ob.cfg.Tools, tenantID, tool, args)
}

// LookupPayment is PaymentOf for a reader with no Outbox (the finance report of a
// read-only command), or inside a transaction (the gate's, which must not take a second
// connection from a pool its own transaction holds one of): it reads with q, and the
// tools' definitions come from reg.
func LookupPayment(ctx context.Context, q Querier, reg *Registry, tenantID int64, tool string, args json.RawMessage) (*Payment, error) {
	t, ok := reg.Lookup(tool)
	if !ok {
		return nil, nil
	}
	return paymentOf(ctx, q, reg, tenantID, t, args)
}

// paymentOf is LookupPayment with the tool looked up, reading with q.
func paymentOf(ctx context.Context, q Querier, reg *Registry, tenantID int64, tool vendorapi.Tool, args json.RawMessage) (*Payment, error) {
	if tool.RefundOf == "" {
		return nil, nil
	}
	var named map[string]json.RawMessage
	_ = json.Unmarshal(args, &named)
	p := &Payment{}
	if json.Unmarshal(named[tool.RefundOf], &p.Ref) != nil || p.Ref == "" {
		return &Payment{}, nil
	}
	var (
		payTool string
		payArgs json.RawMessage
	)
	err := q.QueryRow(ctx, sqlPaymentByRef, tenantID, p.Ref).Scan(&payTool, &payArgs)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: read the payment %s refunds: %w", p.Ref, err)
	}
	if pt, ok := reg.Lookup(payTool); ok && pt.Amount != nil {
		p.Amount, p.Currency, p.Known = pt.Amount(payArgs)
	}
	if !p.Known {
		return &Payment{Ref: p.Ref}, nil
	}
	p.Refunded, err = refunded(ctx, q, tenantID, tool, p)
	return p, err
}

// refunded sums the tenant's succeeded ops of tool that refund p.
func refunded(ctx context.Context, q Querier, tenantID int64, tool vendorapi.Tool, p *Payment) (int64, error) {
	rows, err := q.Query(ctx, sqlRefundsOf, tenantID, tool.Name, tool.RefundOf, p.Ref)
	if err != nil {
		return 0, fmt.Errorf("outbox: read the refunds of %s: %w", p.Ref, err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[json.RawMessage])
	if err != nil {
		return 0, fmt.Errorf("outbox: read the refunds of %s: %w", p.Ref, err)
	}
	var sum int64
	for _, args := range all {
		amount, ok := int64(0), false
		if tool.Amount != nil {
			amount, _, ok = tool.Amount(args)
		}
		if !ok {
			return p.Amount, nil // a full refund: nothing was left after it
		}
		sum += amount
	}
	return min(sum, p.Amount), nil
}

// Describe says in words what a refund of amount (ok false: a refund without an
// amount, of what is left) takes from the payment: "$25.00 USD of a $290.00 USD
// payment, $0.00 USD refunded so far". For a payment oncebox did not make it says so.
// An approval notification carries the payment as a notify.Payment, which says it the
// same way.
func (p *Payment) Describe(amount int64, ok bool) string {
	return (*notify.Payment)(p).Describe(amount, ok)
}
