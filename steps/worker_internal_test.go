package steps

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
)

// TestStepRunnerRetriesPromptly: a step runner that failed (Postgres unreachable for
// a while, as in chaos's long cut) is retried within stepRetryLimit whatever its
// attempt, not after River's attempt^4 seconds, and has attempts enough to outlast an
// outage of minutes before the reconciler hands its op to a person.
func TestStepRunnerRetriesPromptly(t *testing.T) {
	t.Parallel()
	var w any = &worker{}
	retrier, ok := w.(interface {
		NextRetry(*river.Job[Args]) time.Time
	})
	require.True(t, ok, "the step runner sets its own retry delays")
	for attempt := 1; attempt <= stepsMaxAttempts; attempt++ {
		job := &river.Job[Args]{JobRow: &rivertype.JobRow{Attempt: attempt}}
		wait := time.Until(retrier.NextRetry(job))
		require.LessOrEqual(t, wait, stepRetryLimit+stepRetryLimit/5+time.Second, "attempt %d", attempt)
	}
	opts := job("op").InsertOpts
	require.GreaterOrEqual(t, opts.MaxAttempts, 100, "a step runner outlasts a Postgres outage of minutes")
	require.GreaterOrEqual(t, time.Duration(opts.MaxAttempts)*stepRetryLimit, 10*time.Minute)
}
