package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// releaseWait bounds how long a release for resend waits for a live dispatch job that
// has recorded its answer and only waits for River's batched completer.
const releaseWait = 3 * time.Second

// releasePoll is how often it looks again meanwhile.
const releasePoll = 20 * time.Millisecond

// sqlAwaitsCompletion says whether op $1's dispatch job that the op heard last is still
// running the run the op heard (migration 016): with Config.BatchedCompletion that run
// has returned and the job only waits for River's completer, so it will not look at
// the op again. Such a job is live: an insert of another one was skipped.
const sqlAwaitsCompletion = `SELECT EXISTS (SELECT 1 FROM oncebox_op o JOIN river_job j ON j.id = o.heard_job_id
	WHERE o.id = $1::uuid AND j.state = 'running' AND j.attempt = o.heard_job_attempt)`

// insertReleaseJobTx inserts the dispatch job of an op sent (back) to pending inside tx:
// an approval, a release for resend, a rejob. When a live job of the op exists, River
// skips the insert and that job dispatches the op, unless it is finishing a run that
// recorded its answer and waits only for River's batched completer: that job completes
// without looking at the op again, and the op would wait for the reconciler
// (--reconcile-stuck-margin). So it first waits for such a job to finish, up to
// releaseWait (the completer's batches are milliseconds apart; past that the reconciler
// still gives the op a job), and only then inserts: River's unique insert locks the
// live job's row until tx ends, which would hold up the completer. No run can record
// on the op meanwhile: tx holds the op's row.
func (ob *Outbox) insertReleaseJobTx(ctx context.Context, tx pgx.Tx, op *Op) error {
	deadline := time.Now().Add(releaseWait)
	for {
		var awaits bool
		if err := tx.QueryRow(ctx, sqlAwaitsCompletion, op.ID).Scan(&awaits); err != nil {
			return fmt.Errorf("outbox: look at the live dispatch job: %w", err)
		}
		if !awaits || time.Now().After(deadline) {
			return ob.insertJobTx(ctx, tx, op)
		}
		t := time.NewTimer(releasePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
