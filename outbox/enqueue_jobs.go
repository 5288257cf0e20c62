package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/steps"
	"github.com/oncebox/oncebox/vendorapi"
)

// liveJobStates are the River job states in which a dispatch job may still run. An op
// has at most one dispatch job in them (River's unique jobs, by op id), so a resend,
// the reconciler and a rescued job never run one op at once. A finished job (completed,
// discarded, cancelled) does not count: the op may get a new one.
func liveJobStates() []rivertype.JobState {
	return []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
		rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}
}

// insertJobTx inserts the op's dispatch job unless the op has a live one already;
// River then skips the insert as a duplicate, and the live job dispatches the op.
func (ob *Outbox) insertJobTx(ctx context.Context, tx pgx.Tx, op *Op) error {
	return ob.addJobTx(ctx, tx, op, nil)
}

// jobBatch holds the jobs of a group commit's calls, inserted together in one
// statement before the group's COMMIT (see committer.commit) instead of one each.
type jobBatch struct{ jobs []river.InsertManyParams }

// addJobTx inserts the op's job as insertJobTx does or, with a batch, adds it to the
// batch for the insert of them all. A composite op's step run row is inserted now
// either way.
func (ob *Outbox) addJobTx(ctx context.Context, tx pgx.Tx, op *Op, batch *jobBatch) error {
	var job river.InsertManyParams
	if op.Vendor == vendorapi.StepsVendor {
		var err error
		if job, err = steps.StartTx(ctx, tx, op.ID); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
	} else {
		job = ob.dispatchJob(op)
	}
	if batch != nil {
		batch.jobs = append(batch.jobs, job)
		return nil
	}
	if _, err := ob.river.InsertTx(ctx, tx, job.Args, job.InsertOpts); err != nil {
		return fmt.Errorf("outbox: insert %s job: %w", job.Args.Kind(), err)
	}
	return nil
}

// dispatchJob is the op's dispatch job: unique by op id among the live ones.
func (ob *Outbox) dispatchJob(op *Op) river.InsertManyParams {
	return river.InsertManyParams{Args: dispatch.Args{OpID: op.ID, Vendor: op.Vendor}, InsertOpts: &river.InsertOpts{
		Queue:       dispatch.QueueName(op.Vendor),
		MaxAttempts: ob.cfg.riverMaxAttempts(),
		UniqueOpts:  river.UniqueOpts{ByArgs: true, ByState: liveJobStates()},
	}}
}
