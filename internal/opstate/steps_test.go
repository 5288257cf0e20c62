package opstate

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryStepTransition walks the step table against Postgres: each change moves a
// run in its From state to its To state and records a "steps" event on the parent op;
// the same change again (the run is no longer in From, unless a self-loop) writes
// nothing, and every change the table does not list is refused.
func TestEveryStepTransition(t *testing.T) {
	t.Parallel()
	e := newWalkEnv(t)
	ctx := context.Background()
	for _, tr := range StepTransitions() {
		t.Run(fmt.Sprintf("%s->%s", tr.From, tr.To), func(t *testing.T) {
			id, _ := e.seedOp(t, "pending")
			_, err := e.pool.Exec(ctx, `INSERT INTO oncebox_step_run (op_id, state) VALUES ($1, $2)`, id, tr.From)
			require.NoError(t, err)
			ok, err := e.m.ApplyStep(ctx, e.pool, StepChange{OpID: id, From: tr.From, To: tr.To, FailedStep: "charge"})
			require.NoError(t, err)
			require.True(t, ok)
			var state, kind, actor string
			require.NoError(t, e.pool.QueryRow(ctx, `SELECT r.state, e.kind, e.actor FROM oncebox_step_run r
				JOIN oncebox_op_event e ON e.op_id = r.op_id WHERE r.op_id = $1`, id).Scan(&state, &kind, &actor))
			require.Equal(t, string(tr.To), state)
			require.Equal(t, "steps", kind)
			require.Equal(t, string(Steps), actor)
			if tr.From != tr.To {
				ok, err = e.m.ApplyStep(ctx, e.pool, StepChange{OpID: id, From: tr.From, To: tr.To})
				require.NoError(t, err)
				require.False(t, ok, "a run no longer in its from state is not moved")
			}
		})
	}
	states := []StepState{StepRunning, StepSucceeded, StepFailed, StepCompensating, StepCompensated, StepNeedsReview}
	for _, from := range states {
		for _, to := range states {
			if StepAllowed(from, to, Steps) {
				continue
			}
			_, err := e.m.ApplyStep(ctx, e.pool, StepChange{OpID: "00000000-0000-0000-0000-000000000000", From: from, To: to})
			require.True(t, errors.Is(err, ErrNotAllowed), "%s -> %s", from, to)
		}
	}
}
