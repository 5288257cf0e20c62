package audit

import (
	"context"
	"fmt"
	"time"
)

// ExportParams selects the entries Export streams. The filters select ops: an op's
// entries in the window are kept when its call entry in the window matches Tool and the
// amounts, when Person asked for it or decided on it, and when its last status in the
// window is Outcome. With no filter set, every entry of the window is kept, settings
// included; with one, only ops' entries.
type ExportParams struct {
	TenantID int64
	// Since and Until bound the entries' time; Until defaults to an hour from now.
	Since, Until time.Time
	// Tool keeps the ops of this tool ("": any).
	Tool string
	// Person keeps the ops this person asked for (the person of the token that asked)
	// or decided on (approved, rejected, resolved). "": any.
	Person string
	// Outcome keeps the ops whose last status in the window is this one ("succeeded",
	// "failed", "needs_review", ...). "": any.
	Outcome string
	// MinAmount and MaxAmount keep the ops whose call names an amount (in the currency's
	// minor unit) in this range. Nil: no bound.
	MinAmount, MaxAmount *int64
	// Limit is the most entries Export streams. Defaults to all.
	Limit int
}

// Filtered reports whether p selects ops, not every entry of its window.
func (p *ExportParams) Filtered() bool {
	return p.Tool != "" || p.Person != "" || p.Outcome != "" || p.MinAmount != nil || p.MaxAmount != nil
}

// Export calls each with the tenant's entries that p selects, in chain order.
func Export(ctx context.Context, q Querier, p ExportParams, each func(*Entry) error) error {
	if p.Until.IsZero() {
		p.Until = time.Now().Add(time.Hour)
	}
	rows, err := q.Query(ctx, sqlExport, p.TenantID, p.Since, p.Until, p.Tool, p.Person, p.Outcome,
		p.MinAmount, p.MaxAmount, p.Limit)
	if err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return fmt.Errorf("audit: export: %w", err)
		}
		if err := each(e); err != nil {
			return err
		}
	}
	return rows.Err()
}
