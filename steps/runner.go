package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncebox/oncebox/internal/opstate"
)

// EnqueueParams is the op a step (or a compensation) asks for: its parent's tenant,
// conversation and tool call, the step's derived key (Key, CompensationKey), its tool
// and its filled arguments.
type EnqueueParams struct {
	TenantID       int64
	Key            string
	Tool           string
	Args           json.RawMessage
	ConversationID string
	ToolCallID     string
}

// Deps is what the step runner uses of the Outbox that runs it; outbox.New hands it
// over. Every field is required.
type Deps struct {
	// Pool holds oncebox's and River's tables.
	Pool *pgxpool.Pool
	// Ops moves a run's state (ApplyStep) and settles the composite op (Apply).
	Ops *opstate.Machine
	// EnqueueTx enqueues a step's op in tx, a savepoint of the run's transaction, as
	// outbox.Outbox.EnqueueTx does for a caller, with the step's key allowed.
	EnqueueTx func(ctx context.Context, tx pgx.Tx, p EnqueueParams) error
	// Refused reports whether an error of EnqueueTx refuses the step for good (its
	// arguments, its tool, its key, an object it does not own): the run then moves on
	// without it. Any other error makes the run try again later.
	Refused func(err error) bool
	// Logger receives the runner's log lines.
	Logger *slog.Logger
}

func (d *Deps) validate() error {
	if d.Pool == nil || d.Ops == nil || d.EnqueueTx == nil || d.Refused == nil || d.Logger == nil {
		return errors.New("steps: Deps needs Pool, Ops, EnqueueTx, Refused and Logger")
	}
	return nil
}

// Runner runs composite ops' steps (docs/steps.md). The Outbox owns it: its worker runs
// on the Outbox's River client, and the Outbox's enqueue starts each run (StartTx).
type Runner struct {
	deps Deps
}

// New builds a Runner with the Outbox's deps.
func New(deps Deps) (*Runner, error) {
	if err := deps.validate(); err != nil {
		return nil, err
	}
	return &Runner{deps: deps}, nil
}

// Register adds the step runner's worker to workers.
func (r *Runner) Register(workers *river.Workers) error {
	if err := river.AddWorkerSafely(workers, &worker{r: r}); err != nil {
		return fmt.Errorf("steps: register steps worker: %w", err)
	}
	return nil
}

// StartTx starts the run of the new composite op opID in tx, the enqueue's
// transaction: it inserts the run's row and returns the runner's job, for the caller
// to insert in tx (alone, or with a group commit's other jobs). The job is unique by op
// id among the live ones, and the row goes in first.
func StartTx(ctx context.Context, tx pgx.Tx, opID string) (river.InsertManyParams, error) {
	if _, err := tx.Exec(ctx, sqlStepRunInsert, opID); err != nil {
		return river.InsertManyParams{}, fmt.Errorf("steps: insert step run: %w", err)
	}
	return job(opID), nil
}

// job is a composite op's step runner job.
func job(opID string) river.InsertManyParams {
	return river.InsertManyParams{Args: Args{OpID: opID}, InsertOpts: &river.InsertOpts{
		Queue:       Queue,
		MaxAttempts: stepsMaxAttempts,
		UniqueOpts:  river.UniqueOpts{ByArgs: true, ByState: liveJobStates},
	}}
}

// liveJobStates are the River job states in which a job may still run: a composite op
// has at most one runner job in them, as it has one dispatch job (outbox's own list).
var liveJobStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}
