package steps

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// Args is the River job that advances a composite op's steps: one job per composite op
// (unique by op id, like a dispatch job), which snoozes while a step's op is on its way
// and completes once the op is settled.
type Args struct {
	OpID string `json:"op_id"`
}

// Kind implements river.JobArgs.
func (Args) Kind() string { return "oncebox.steps" }

// Queue is the River queue of the step runner's jobs.
const Queue = "oncebox_steps"

// worker runs Args jobs.
type worker struct {
	river.WorkerDefaults[Args]
	r *Runner
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
func (w *worker) NextRetry(job *river.Job[Args]) time.Time {
	return time.Now().Add(cappedBackoff(stepRetryLimit, job.Attempt))
}

// cappedBackoff is a retry delay of 2^(attempt-1) seconds, with up to 20% jitter,
// capped at limit: outbox.CappedBackoff's, which this package does not import.
func cappedBackoff(limit time.Duration, attempt int) time.Duration {
	d := limit
	if attempt < 30 {
		d = min(time.Duration(1<<max(attempt-1, 0))*time.Second, limit)
	}
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// Work advances the op's steps in one transaction, then snoozes while a step's op is
// on its way.
func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	var run stepRun
	err := pgx.BeginFunc(ctx, w.r.deps.Pool, func(tx pgx.Tx) error {
		var err error
		run, err = w.r.advance(ctx, tx, job.Args.OpID)
		return err
	})
	if err != nil {
		return err
	}
	run.settled.Report()
	if run.wait {
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

// advance makes one move of the composite op opID's run (planSteps) in tx: it enqueues
// the next step's op with Deps.EnqueueTx under its derived key (a rerun after a crash
// finds it: a replay, never a second op), moves the run's state, and settles the parent
// op once the run is over.
func (r *Runner) advance(ctx context.Context, tx pgx.Tx, opID string) (stepRun, error) {
	parent, steps, err := lockParent(ctx, tx, opID)
	if errors.Is(err, errNotFound) || (err == nil && parent.Status != protocol.StatusPending) {
		return stepRun{}, nil // settled (or purged): nothing to do
	}
	if err != nil {
		return stepRun{}, err
	}
	in := stepInput{ParentID: parent.ID, Steps: steps, Args: parent.Args, Refused: map[string]string{}}
	if _, err := tx.Exec(ctx, sqlStepRunInsert, parent.ID); err != nil {
		return stepRun{}, fmt.Errorf("steps: insert step run: %w", err)
	}
	if err := tx.QueryRow(ctx, sqlStepRunLock, parent.ID).Scan(&in.State, &in.FailedStep); err != nil {
		return stepRun{}, fmt.Errorf("steps: lock step run: %w", err)
	}
	if in.State == opstate.StepNeedsReview {
		// A person released the parent op for resend: its run looks at its steps again.
		if _, err := r.deps.Ops.ApplyStep(ctx, tx, opstate.StepChange{OpID: parent.ID, From: in.State, To: opstate.StepRunning,
			Detail: map[string]any{"why": "released for resend"}}); err != nil {
			return stepRun{}, err
		}
		in.State, in.FailedStep = opstate.StepRunning, ""
	}
	if in.Ops, err = stepOps(ctx, tx, parent.TenantID, parent.ID); err != nil {
		return stepRun{}, err
	}
	if in.Purged, err = stepTombstones(ctx, tx, parent.TenantID, parent.ID); err != nil {
		return stepRun{}, err
	}
	for {
		p := planSteps(in)
		if p.Enqueue != nil {
			refused, err := r.enqueueStep(ctx, tx, parent, p.Enqueue)
			if err != nil {
				return stepRun{}, err
			}
			if refused != "" {
				in.Refused[p.Enqueue.Key] = refused
				continue
			}
		}
		return r.applyStepPlan(ctx, tx, parent, in, p)
	}
}

// enqueueStep enqueues a step's op in a savepoint; it returns why when the call is
// refused for good (Deps.Refused: its arguments, its tool, its key), and an error for
// anything else (a budget's refusal, the database): the run is then tried again later.
func (r *Runner) enqueueStep(ctx context.Context, tx pgx.Tx, parent *parentOp, c *stepCall) (string, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return "", err
	}
	err = r.deps.EnqueueTx(ctx, sp, EnqueueParams{TenantID: parent.TenantID, Key: c.Key, Tool: c.Tool, Args: c.Args,
		ConversationID: parent.ConversationID, ToolCallID: parent.ToolCallID})
	if err == nil {
		return "", sp.Commit(ctx)
	}
	_ = sp.Rollback(ctx)
	if r.deps.Refused(err) {
		return err.Error(), nil
	}
	r.deps.Logger.Warn("a step's op could not be enqueued; the step waits", slog.String("op_id", parent.ID),
		slog.String("step", c.Step), slog.String("tool", c.Tool), slog.Any("error", err))
	return "", fmt.Errorf("steps: enqueue step %s: %w", c.Step, err)
}

// applyStepPlan writes p: the run's state change (with its event), and, once the run is
// over, the parent op's settlement.
func (r *Runner) applyStepPlan(ctx context.Context, tx pgx.Tx, parent *parentOp, in stepInput, p stepPlan) (stepRun, error) {
	if p.To != in.State || p.Enqueue != nil {
		detail := map[string]any{"why": p.Why}
		if p.Enqueue != nil {
			detail["enqueued"], detail["key"] = p.Enqueue.Step, p.Enqueue.Key
		}
		ok, err := r.deps.Ops.ApplyStep(ctx, tx, opstate.StepChange{OpID: parent.ID, From: in.State, To: p.To,
			FailedStep: p.FailedStep, Detail: detail})
		if err != nil || !ok {
			return stepRun{}, errors.Join(err, errors.New("steps: the step run moved meanwhile"))
		}
	}
	if !p.To.Terminal() {
		return stepRun{wait: true}, nil
	}
	refs, err := Refs(ctx, tx, parent.TenantID, parent.ID)
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
	a, err := r.deps.Ops.Apply(ctx, tx, c)
	return stepRun{settled: a}, err
}

// errNotFound is lockParent's answer for an op that does not exist (purged).
var errNotFound = errors.New("steps: composite op not found")

// parentOp is what the runner reads of a composite op.
type parentOp struct {
	ID             string
	TenantID       int64
	Status         protocol.Status
	Args           json.RawMessage
	ConversationID string
	ToolCallID     string
}

// lockParent reads and locks a composite op and the steps it was accepted with.
func lockParent(ctx context.Context, tx pgx.Tx, opID string) (*parentOp, []vendorapi.Step, error) {
	op := &parentOp{}
	var status string
	var def []byte
	err := tx.QueryRow(ctx, sqlParentForUpdate, opID).Scan(&op.ID, &op.TenantID, &status, &op.Args,
		&op.ConversationID, &op.ToolCallID, &def)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, errNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("steps: lock composite op: %w", err)
	}
	op.Status = protocol.Status(status)
	var steps []vendorapi.Step
	if err := json.Unmarshal(def, &steps); err != nil {
		return nil, nil, fmt.Errorf("steps: the steps stored with composite op %s are not readable: %w", opID, err)
	}
	return op, steps, nil
}

// stepOps reads the ops of a composite op's steps and compensations, by key.
func stepOps(ctx context.Context, q Querier, tenantID int64, parentID string) (map[string]*stepOp, error) {
	rows, err := q.Query(ctx, sqlStepOps, tenantID, KeyPrefix+parentID+"/")
	if err != nil {
		return nil, fmt.Errorf("steps: read step ops: %w", err)
	}
	out := map[string]*stepOp{}
	for rows.Next() {
		s := &stepOp{}
		var status string
		if err := rows.Scan(&s.ID, &s.Key, &status, &s.VendorRef, &s.Result); err != nil {
			rows.Close()
			return nil, fmt.Errorf("steps: read step ops: %w", err)
		}
		s.Status = protocol.Status(status)
		out[s.Key] = s
	}
	return out, rows.Err()
}

// stepTombstones reads the keys of a composite op's steps and compensations whose ops
// were purged.
func stepTombstones(ctx context.Context, q Querier, tenantID int64, parentID string) (map[string]bool, error) {
	rows, err := q.Query(ctx, sqlStepTombstones, tenantID, KeyPrefix+parentID+"/")
	if err != nil {
		return nil, fmt.Errorf("steps: read purged step ops: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("steps: read purged step ops: %w", err)
	}
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out, nil
}
