package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestAStaleSnoozeDoesNotRunAnAttemptTwice: River's snooze, applied by its completer
// (JobSetStateIfRunningMany, guarded by `state = 'running'` alone), sets the job's attempt
// to the snoozing run's less one. Applied a second time (a completer batch retried after a
// network cut, whose first send reached Postgres late), it would move the job's next run,
// already running at that attempt, back to scheduled, and the same attempt number would run
// twice: two clean runs, two vendor calls (make chaos saw a mail sent twice). Migration 039
// leaves such a stale snooze without effect, and lets each run's own snooze through. The
// snoozes go through River's own driver with River's own parameters.
func TestAStaleSnoozeDoesNotRunAnAttemptTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	exec := riverpgxv5.New(pool).GetExecutor()
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, attempt, attempted_at, attempted_by, metadata)
		VALUES ('{"op_id":"x"}', 'oncebox.dispatch', 25, 'oncebox_sendgrid', 'running', 1, now(), '{r1}', '{}') RETURNING id`).Scan(&id))
	snooze := func(attempt int, snoozes string) {
		t.Helper()
		p := riverdriver.JobSetStateSnoozed(id, time.Now().Add(-time.Second), attempt, []byte(`{"snoozes":`+snoozes+`}`))
		_, err := exec.JobSetStateIfRunningMany(ctx, &riverdriver.JobSetStateIfRunningManyParams{
			ID: []int64{id}, Attempt: []*int{p.Attempt}, ErrData: [][]byte{p.ErrData}, FinalizedAt: []*time.Time{p.FinalizedAt},
			MetadataDoMerge: []bool{p.MetadataDoMerge}, MetadataUpdates: [][]byte{p.MetadataUpdates},
			ScheduledAt: []*time.Time{p.ScheduledAt}, State: []rivertype.JobState{p.State},
		})
		require.NoError(t, err)
	}
	fetch := func(by string) {
		t.Helper()
		_, err := pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = attempt + 1, attempted_at = now(),
			attempted_by = array_append(attempted_by, $2) WHERE id = $1 AND state IN ('scheduled', 'available')`, id, by)
		require.NoError(t, err)
	}
	row := func() (state string, attempt int) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, "SELECT state::text, attempt FROM river_job WHERE id = $1", id).Scan(&state, &attempt))
		return state, attempt
	}

	// Run r1 at attempt 1 snoozes (a 429's Retry-After): the next run is attempt 1 again.
	snooze(0, "1")
	state, attempt := row()
	require.Equal(t, "scheduled", state)
	require.Equal(t, 0, attempt)
	fetch("x")
	state, attempt = row()
	require.Equal(t, "running", state)
	require.Equal(t, 1, attempt)

	// r1's snooze again, while run x runs attempt 1: nothing changes.
	snooze(0, "1")
	state, attempt = row()
	require.Equal(t, "running", state, "a stale snooze moved the running run's job back to scheduled")
	require.Equal(t, 1, attempt)

	// x's own snooze goes through.
	snooze(0, "2")
	state, attempt = row()
	require.Equal(t, "scheduled", state)
	require.Equal(t, 0, attempt)

	// A stale snooze of an earlier attempt on a later one: nothing changes either.
	fetch("y")
	_, err := pool.Exec(ctx, "UPDATE river_job SET attempt = 3 WHERE id = $1", id)
	require.NoError(t, err)
	snooze(0, "3")
	state, attempt = row()
	require.Equal(t, "running", state)
	require.Equal(t, 3, attempt)
}
