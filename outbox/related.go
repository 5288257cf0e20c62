package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/vendorapi"
)

// maxRelated bounds the refunds Related lists.
const maxRelated = 200

// Related is what support's lookup follows from an op, to answer "was I refunded
// twice?": the payment a refund gives money back from, and every refund made of that
// payment.
type Related struct {
	// Payment is the tenant's op that made the payment: the op itself when it is a
	// payment, the payment a refund names otherwise. nil when the refund names a
	// payment oncebox did not make (PaymentRef says which).
	Payment *Op
	// PaymentRef is the vendor id the refund names its payment by (a pi_… or ch_…);
	// empty for a payment.
	PaymentRef string
	// Refunds are the tenant's ops of refund tools (Tool.RefundOf) that name the
	// payment, by its vendor reference or one of its RefAliases, oldest first; the
	// looked-up refund is one of them.
	Refunds []*Op
}

// Related returns the payment op is or refunds and the refunds made of it, or nil
// when op is neither a refund nor an op that any refund names.
func (ob *Outbox) Related(ctx context.Context, tenantID int64, op *Op) (*Related, error) {
	rel := &Related{}
	if tool, ok := ob.cfg.Tools.Lookup(op.Tool); ok && tool.RefundOf != "" {
		rel.PaymentRef = namedObject(tool, op.Args)
		if rel.PaymentRef == "" {
			return nil, nil
		}
		p, err := ob.paymentNamed(ctx, tenantID, rel.PaymentRef)
		if err != nil {
			return nil, err
		}
		rel.Payment = p
	} else if op.VendorRef != "" {
		rel.Payment = op
	}
	ids := []string{rel.PaymentRef}
	if rel.Payment != nil {
		ids = append(ids, paymentIDs(ob.cfg.Tools, rel.Payment)...)
	}
	refunds, err := ob.refundsNaming(ctx, tenantID, ids)
	if err != nil {
		return nil, err
	}
	rel.Refunds = refunds
	if rel.PaymentRef == "" && len(refunds) == 0 {
		return nil, nil
	}
	return rel, nil
}

// namedObject is the object a refund's arguments name: its RefundOf argument, else the
// first of its Objects that is set.
func namedObject(tool vendorapi.Tool, args json.RawMessage) string {
	var named map[string]any
	_ = json.Unmarshal(args, &named)
	for _, arg := range append([]string{tool.RefundOf}, objectArgs(tool)...) {
		if s, ok := named[arg].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// objectArgs names the arguments of tool that name objects (Tool.Objects).
func objectArgs(tool vendorapi.Tool) []string {
	out := make([]string, 0, len(tool.Objects))
	for _, o := range tool.Objects {
		out = append(out, o.Arg)
	}
	return out
}

// paymentIDs are the vendor ids a payment op is known by: its reference and the
// members of its result that its tool's RefAliases name.
func paymentIDs(reg *Registry, op *Op) []string {
	ids := []string{op.VendorRef}
	tool, ok := reg.Lookup(op.Tool)
	if !ok || len(op.Result) == 0 {
		return ids
	}
	var result map[string]any
	_ = json.Unmarshal(op.Result, &result)
	for _, m := range tool.RefAliases {
		if s, ok := result[m].(string); ok && s != "" {
			ids = append(ids, s)
		}
	}
	return ids
}

// aliases are the result members every registered tool's RefAliases name.
func (r *Registry) aliases() []string {
	var out []string
	for _, t := range r.set() {
		out = append(out, t.RefAliases...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// paymentNamed is the tenant's op known by the vendor id ref (its reference or an
// alias), the oldest; nil when none is.
func (ob *Outbox) paymentNamed(ctx context.Context, tenantID int64, ref string) (*Op, error) {
	var key string
	err := ob.pool.QueryRow(ctx, sqlOpKnownAs, tenantID, ref, ob.cfg.Tools.aliases()).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: find the payment %s: %w", ref, err)
	}
	op, err := ob.Get(ctx, tenantID, key)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return op, err
}

// refundsNaming returns the tenant's ops of refund tools whose object arguments name
// one of ids, oldest first.
func (ob *Outbox) refundsNaming(ctx context.Context, tenantID int64, ids []string) ([]*Op, error) {
	ids = slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == "" })
	if len(ids) == 0 {
		return nil, nil
	}
	var out []*Op
	for _, name := range ob.cfg.Tools.NamesFor(tenantID) {
		tool, _ := ob.cfg.Tools.Lookup(name)
		if tool.RefundOf == "" {
			continue
		}
		args := append([]string{tool.RefundOf}, objectArgs(tool)...)
		rows, err := ob.pool.Query(ctx, sqlRefundsNaming, tenantID, tool.Name, args, ids, maxRelated)
		if err != nil {
			return nil, fmt.Errorf("outbox: find the refunds of %v: %w", ids, err)
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("outbox: find the refunds of %v: %w", ids, err)
		}
		for _, k := range keys {
			op, err := ob.Get(ctx, tenantID, k)
			if errors.Is(err, ErrNotFound) {
				continue // purged in between
			}
			if err != nil {
				return nil, err
			}
			out = append(out, op)
		}
	}
	slices.SortStableFunc(out, func(a, b *Op) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}
