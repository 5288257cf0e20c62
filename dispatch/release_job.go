package dispatch

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

// InsertReleaseJobTx inserts the job of an op sent (back) to pending inside tx:
// an approval, a release for resend, a rejob. When a live job of the op exists, River
// skips the insert and that job dispatches the op, unless it is finishing a run that
// recorded its answer and waits only for River's batched completer: that job completes
// without looking at the op again, and the op would wait for the reconciler
// (--reconcile-stuck-margin). So it first waits for such a job to finish, up to
// releaseWait (the completer's batches are milliseconds apart; past that the reconciler
// still gives the op a job), and only then inserts: River's unique insert locks the
// live job's row until tx ends, which would hold up the completer. No run can record
// on the op meanwhile: tx holds the op's row.
func (d *Dispatcher) InsertReleaseJobTx(ctx context.Context, tx pgx.Tx, opID, vendor string) error {
	deadline := time.Now().Add(releaseWait)
	for {
		var awaits bool
		if err := tx.QueryRow(ctx, sqlAwaitsCompletion, opID).Scan(&awaits); err != nil {
			return fmt.Errorf("outbox: look at the live dispatch job: %w", err)
		}
		if !awaits || time.Now().After(deadline) {
			return d.deps.InsertJobTx(ctx, tx, opID, vendor)
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
