package opstate

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
)

// TestCleanRecordDeletesItsJobOnlyWhenItSettles checks which clean records delete their
// River job's row (instead of leaving it to River's completer): only one that was
// applied, makes the op terminal and ends its run. A fenced record must leave the row,
// whose next run treats the op as possibly sent; a record that keeps the op open must
// leave it to River, which completes or retries it.
func TestCleanRecordDeletesItsJobOnlyWhenItSettles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newWalkEnv(t)
	otherJob, otherAttempt := int64(99), 1
	for _, tc := range []struct {
		name      string
		to        protocol.Status
		endsJob   bool
		heard     Heard
		recorded  bool
		jobIsGone bool
	}{
		{name: "terminal, run ends", to: protocol.StatusSucceeded, endsJob: true, recorded: true, jobIsGone: true},
		{name: "failed, run ends", to: protocol.StatusFailed, endsJob: true, recorded: true, jobIsGone: true},
		{name: "not terminal", to: protocol.StatusNeedsReview, endsJob: true, recorded: true},
		{name: "the run goes on", to: protocol.StatusSucceeded, recorded: true},
		{name: "fenced: another run was heard since", to: protocol.StatusSucceeded, endsJob: true,
			heard: Heard{JobID: &otherJob, Attempt: &otherAttempt}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, _ := e.seedOp(t, protocol.StatusPending)
			var jobID int64
			require.NoError(t, e.pool.QueryRow(ctx, `INSERT INTO river_job (kind, args, state, attempt, max_attempts, queue, attempted_at)
				VALUES ('oncebox.dispatch', '{}', 'running', 1, 25, 'fake', now()) RETURNING id`).Scan(&jobID))
			a, err := e.m.RecordClean(ctx, e.pool, Record{Ident: Ident{ID: id, Vendor: "fake"}, To: tc.to, Outcome: "test",
				JobID: jobID, JobAttempt: 1, HeardAttempt: 1, EndsJob: tc.endsJob}, tc.heard, false)
			require.NoError(t, err)
			require.Equal(t, tc.recorded, a != nil, "recorded")
			var jobs int
			require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE id = $1`, jobID).Scan(&jobs))
			require.Equal(t, tc.jobIsGone, jobs == 0, "the job's row deleted")
		})
	}
}
