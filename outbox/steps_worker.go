package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// StepsArgs is the River job that advances a composite op's steps: one job per
// composite op (unique by op id, like a dispatch job), which snoozes while a step's op
// is on its way and completes once the op is settled.
type StepsArgs struct {
	OpID string `json:"op_id"`
}

// Kind implements river.JobArgs.
func (StepsArgs) Kind() string { return "oncebox.steps" }

// StepsQueue is the River queue of the step runner's jobs.
const StepsQueue = "oncebox_steps"

// stepsWorker runs StepsArgs jobs.
type stepsWorker struct {
	river.WorkerDefaults[StepsArgs]
	ob *Outbox
}

// maxStepSnooze bounds how long a step runner waits before it looks at its steps' ops
// again.
const maxStepSnooze = 5 * time.Second

// A step runner fails only when Postgres does (it calls no vendor): its retries stay
// prompt, every stepRetryLimit at most, and it has stepsMaxAttempts of them (about a
// quarter of an hour of failures in a row) before River discards it and the
// reconciler hands the composite op to a person. River's own attempt^4 seconds would
// leave a composite op waiting for hours after a Postgres outage of two minutes.
const (
	stepRetryLimit   = 10 * time.Second
	stepsMaxAttempts = 100
)

// NextRetry retries a failed step run after 1 s, 2 s, 4 s, … never more than
// stepRetryLimit (and its jitter).
func (w *stepsWorker) NextRetry(job *river.Job[StepsArgs]) time.Time {
	return time.Now().Add(dispatch.CappedBackoff(stepRetryLimit)(job.Attempt))
}

// Work advances the op's steps in one transaction, then snoozes while a step's op is
// on its way.
func (w *stepsWorker) Work(ctx context.Context, job *river.Job[StepsArgs]) error {
	var r stepRun
	err := pgx.BeginFunc(ctx, w.ob.pool, func(tx pgx.Tx) error {
		var err error
		r, err = w.ob.advanceSteps(ctx, tx, job.Args.OpID)
		return err
	})
	if err != nil {
		return err
	}
	r.settled.Report()
	if r.wait {
		// Each snooze a little longer, from 200 ms to maxStepSnooze: River makes a snooze
		// shorter than its scheduler's interval available at once, due at its time.
		var meta struct {
			Snoozes int `json:"snoozes"`
		}
		_ = json.Unmarshal(job.Metadata, &meta)
		return river.JobSnooze(min(maxStepSnooze, time.Duration(1+meta.Snoozes)*200*time.Millisecond))
	}
	return nil
}

// stepRun is what one run did.
type stepRun struct {
	wait    bool
	settled *opstate.Applied
}

// advanceSteps makes one move of the composite op opID's run (planSteps) in tx: it
// enqueues the next step's op with EnqueueTx under its derived key (a rerun after a
// crash finds it: a replay, never a second op), moves the run's state, and settles the
// parent op once the run is over.
func (ob *Outbox) advanceSteps(ctx context.Context, tx pgx.Tx, opID string) (stepRun, error) {
	parent, steps, err := ob.lockParent(ctx, tx, opID)
	if errors.Is(err, ErrNotFound) || (err == nil && parent.Status != protocol.StatusPending) {
		return stepRun{}, nil // settled (or purged): nothing to do
	}
	if err != nil {
		return stepRun{}, err
	}
	in := stepInput{ParentID: parent.ID, Steps: steps, Args: parent.Args, Refused: map[string]string{}}
	if _, err := tx.Exec(ctx, sqlStepRunInsert, parent.ID); err != nil {
		return stepRun{}, fmt.Errorf("outbox: insert step run: %w", err)
	}
	if err := tx.QueryRow(ctx, sqlStepRunLock, parent.ID).Scan(&in.State, &in.FailedStep); err != nil {
		return stepRun{}, fmt.Errorf("outbox: lock step run: %w", err)
	}
	if in.State == opstate.StepNeedsReview {
		// A person released the parent op for resend: its run looks at its steps again.
		if _, err := ob.ops.ApplyStep(ctx, tx, opstate.StepChange{OpID: parent.ID, From: in.State, To: opstate.StepRunning,
			Detail: map[string]any{"why": "released for resend"}}); err != nil {
			return stepRun{}, err
		}
		in.State, in.FailedStep = opstate.StepRunning, ""
	}
	if in.Ops, err = stepOps(ctx, tx, parent); err != nil {
		return stepRun{}, err
	}
	if in.Purged, err = stepTombstones(ctx, tx, parent); err != nil {
		return stepRun{}, err
	}
	for {
		p := planSteps(in)
		if p.Enqueue != nil {
			refused, err := ob.enqueueStep(ctx, tx, parent, p.Enqueue)
			if err != nil {
				return stepRun{}, err
			}
			if refused != "" {
				in.Refused[p.Enqueue.Key] = refused
				continue
			}
		}
		return ob.applyStepPlan(ctx, tx, parent, in, p)
	}
}

// enqueueStep enqueues a step's op in a savepoint; it returns why when the call is
// refused for good (its arguments, its tool, its key), and an error for anything else
// (a budget's refusal, the database): the run is then tried again later.
func (ob *Outbox) enqueueStep(ctx context.Context, tx pgx.Tx, parent *Op, c *stepCall) (string, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return "", err
	}
	_, err = ob.EnqueueTx(ctx, sp, EnqueueParams{TenantID: parent.TenantID, Key: c.Key, Tool: c.Tool, Args: c.Args,
		ConversationID: parent.ConversationID, ToolCallID: parent.ToolCallID, step: true})
	if err == nil {
		return "", sp.Commit(ctx)
	}
	_ = sp.Rollback(ctx)
	if errors.Is(err, vendorapi.ErrInvalidArgs) || errors.Is(err, ErrUnknownTool) || errors.Is(err, ErrKeyConflict) || errors.Is(err, ErrNotOwned) {
		return err.Error(), nil
	}
	ob.logger.Warn("a step's op could not be enqueued; the step waits", slog.String("op_id", parent.ID),
		slog.String("step", c.Step), slog.String("tool", c.Tool), slog.Any("error", err))
	return "", fmt.Errorf("outbox: enqueue step %s: %w", c.Step, err)
}

// applyStepPlan writes p: the run's state change (with its event), and, once the run is
// over, the parent op's settlement.
func (ob *Outbox) applyStepPlan(ctx context.Context, tx pgx.Tx, parent *Op, in stepInput, p stepPlan) (stepRun, error) {
	if p.To != in.State || p.Enqueue != nil {
		detail := map[string]any{"why": p.Why}
		if p.Enqueue != nil {
			detail["enqueued"], detail["key"] = p.Enqueue.Step, p.Enqueue.Key
		}
		ok, err := ob.ops.ApplyStep(ctx, tx, opstate.StepChange{OpID: parent.ID, From: in.State, To: p.To,
			FailedStep: p.FailedStep, Detail: detail})
		if err != nil || !ok {
			return stepRun{}, errors.Join(err, errors.New("outbox: the step run moved meanwhile"))
		}
	}
	if !p.To.Terminal() {
		return stepRun{wait: true}, nil
	}
	refs, err := ob.stepRefs(ctx, tx, parent)
	if err != nil {
		return stepRun{}, err
	}
	c := opstate.Change{OpID: parent.ID, From: protocol.StatusPending, By: opstate.Steps, Kind: "steps",
		Detail: map[string]any{"state": p.To, "why": p.Why}}
	body := map[string]any{"state": p.To, "steps": refs}
	switch p.To {
	case opstate.StepSucceeded:
		c.To = protocol.StatusSucceeded
		c.Result, err = json.Marshal(body)
	case opstate.StepNeedsReview:
		c.To = protocol.StatusNeedsReview
	default:
		c.To = protocol.StatusFailed
		body["code"], body["message"], body["failed_step"] = "step_failed", p.Why, cmp.Or(p.FailedStep, in.FailedStep)
		c.Error, err = json.Marshal(body)
	}
	if err != nil {
		return stepRun{}, err
	}
	a, err := ob.ops.Apply(ctx, tx, c)
	return stepRun{settled: a}, err
}

// lockParent reads and locks a composite op and the steps it was accepted with.
func (ob *Outbox) lockParent(ctx context.Context, tx pgx.Tx, opID string) (*Op, []vendorapi.Step, error) {
	op := &Op{}
	var def []byte
	err := tx.QueryRow(ctx, sqlParentForUpdate, opID).Scan(append(op.scanDest(), &def)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("outbox: lock composite op: %w", err)
	}
	op.fromScan()
	var steps []vendorapi.Step
	if err := json.Unmarshal(def, &steps); err != nil {
		return nil, nil, fmt.Errorf("outbox: the steps stored with composite op %s are not readable: %w", opID, err)
	}
	return op, steps, nil
}

// stepOps reads the ops of a composite op's steps and compensations, by key.
func stepOps(ctx context.Context, q Querier, parent *Op) (map[string]*stepOp, error) {
	rows, err := q.Query(ctx, sqlStepOps, parent.TenantID, StepKeyPrefix+parent.ID+"/")
	if err != nil {
		return nil, fmt.Errorf("outbox: read step ops: %w", err)
	}
	out := map[string]*stepOp{}
	for rows.Next() {
		s := &stepOp{}
		var status string
		if err := rows.Scan(&s.ID, &s.Key, &status, &s.VendorRef, &s.Result); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox: read step ops: %w", err)
		}
		s.Status = protocol.Status(status)
		out[s.Key] = s
	}
	return out, rows.Err()
}

// stepTombstones reads the keys of a composite op's steps and compensations whose ops
// were purged.
func stepTombstones(ctx context.Context, q Querier, parent *Op) (map[string]bool, error) {
	rows, err := q.Query(ctx, sqlStepTombstones, parent.TenantID, StepKeyPrefix+parent.ID+"/")
	if err != nil {
		return nil, fmt.Errorf("outbox: read purged step ops: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("outbox: read purged step ops: %w", err)
	}
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out, nil
}

// stepsJob is a composite op's step runner job: unique by op id among the live ones
// (its step run row goes in first: see addJobTx).
func stepsJob(op *Op) river.InsertManyParams {
	return river.InsertManyParams{Args: StepsArgs{OpID: op.ID}, InsertOpts: &river.InsertOpts{
		Queue:       StepsQueue,
		MaxAttempts: stepsMaxAttempts,
		UniqueOpts:  river.UniqueOpts{ByArgs: true, ByState: liveJobStates()},
	}}
}
