package vendorevents

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/finance"
)

var _ finance.EventSource = (*Store)(nil)

// OpStates says, per op id, what the stored events tell the finance report: a mail's
// delivery state (its most final one), and the refunds reported failed after they were
// created (refund.failed).
func (s *Store) OpStates(ctx context.Context, opIDs []string) (map[string]finance.EventState, error) {
	out := map[string]finance.EventState{}
	if len(opIDs) == 0 {
		return out, nil
	}
	byOp, err := s.forOps(ctx, opIDs)
	if err != nil {
		return nil, err
	}
	for op, evs := range byOp {
		var st finance.EventState
		for _, e := range evs {
			switch {
			case e.Unconfirmed:
				// Not proven to be about the op's object.
			case e.ObjectType == ObjectMessage && statusRank(ObjectMessage, e.Status) >= statusRank(ObjectMessage, st.Delivery):
				st.Delivery = e.Status
			case e.Type == "refund.failed":
				st.FailedRefunds = append(st.FailedRefunds, e.ObjectID)
			}
		}
		out[op] = st
	}
	return out, nil
}

// OrphanCounts counts, per vendor, the events received in [since, until) whose tag
// names no op.
func (s *Store) OrphanCounts(ctx context.Context, since, until time.Time) (map[string]int, error) {
	rows, err := s.cfg.Pool.Query(ctx, sqlOrphanCounts, since, until)
	if err != nil {
		return nil, fmt.Errorf("vendorevents: orphan counts: %w", err)
	}
	out := map[string]int{}
	var (
		vendor string
		n      int
	)
	_, err = pgx.ForEachRow(rows, []any{&vendor, &n}, func() error {
		out[vendor] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vendorevents: orphan counts: %w", err)
	}
	return out, nil
}
