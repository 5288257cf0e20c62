package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
)

// QueueName is the River queue that carries the sweep job. The process that runs the
// sweeper adds it through outbox.Config.ExtraQueues (MaxWorkers 2 is plenty).
const QueueName = "oncebox_maintenance"

// defaultSweepTimeout bounds one sweep run as a River job. It stays below outbox's
// default RescueStuckJobsAfter (2 minutes), so River never rescues a sweep that is still
// running; ops left unvisited are picked up by the next sweep.
const defaultSweepTimeout = 90 * time.Second

// Observer is told about the sweeper's decisions, for metrics. Every method must be quick
// and safe for concurrent use.
type Observer interface {
	// Decision is called once per decision taken about an op, with one of the Decision
	// constants.
	Decision(vendor, decision string)
	// Duplicate is called when the vendor holds two or more objects for one op.
	Duplicate(vendor string)
}

type nopObserver struct{}

func (nopObserver) Decision(string, string) {}
func (nopObserver) Duplicate(string)        {}

// Config configures a Reconciler.
type Config struct {
	// Outbox gives the sweeper its pool, vendors, job timeouts and dispatch-job inserts.
	// It may be nil in New when the Reconciler must exist before the Outbox (its worker
	// and periodic job go into outbox.Config); call SetOutbox before the first sweep.
	Outbox *outbox.Outbox
	// Interval is how often the periodic sweep runs (ONCEBOX_RECONCILE_INTERVAL).
	// Defaults to 30 seconds.
	Interval time.Duration
	// BatchSize is how many unknown ops one sweep looks up at most. Defaults to 100.
	BatchSize int
	// ResendOnNone says, per vendor name, what to do when the vendor holds no object for
	// an op after its lookup lag: resend (true) or hand the op to a person (false).
	// Defaults to true for every vendor missing from the map.
	ResendOnNone map[string]bool
	// MaxAttempts is how many dispatch attempts an op may have had for the sweeper to
	// still resend it after finding nothing; past it the op goes to needs_review, so an
	// op that keeps ending unknown does not loop forever. Defaults to
	// outbox.DefaultMaxAttempts (10).
	MaxAttempts int
	// StuckMargin is how long past its vendor's job timeout an op may stay in
	// dispatching, with no dispatch job running, before the sweeper moves it to
	// unknown. Defaults to 30 seconds.
	StuckMargin time.Duration
	// Concurrency is how many ops one sweep looks up at once. Vendors' own rate limits
	// still apply (SendGrid's activity limiter is shared by the process). Defaults to 4.
	Concurrency int
	// SweepTimeout bounds one sweep run; the ops a sweep leased but did not reach (its
	// process died, or the timeout hit) come back this long after it started. Keep it
	// below the outbox's RescueStuckJobsAfter. Defaults to 90 seconds.
	SweepTimeout time.Duration
	// RetryLookupAfter is how long the sweeper waits after a failed lookup (rate
	// limited, network) before asking again. Defaults to 1 minute.
	RetryLookupAfter time.Duration
	// Observer receives decisions and duplicates for metrics. Defaults to one that does
	// nothing.
	Observer Observer
	// Logger receives structured logs. Defaults to the Outbox's logger.
	Logger *slog.Logger
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.Interval == 0 {
		out.Interval = 30 * time.Second
	}
	if out.BatchSize == 0 {
		out.BatchSize = 100
	}
	if out.MaxAttempts == 0 {
		out.MaxAttempts = outbox.DefaultMaxAttempts
	}
	if out.StuckMargin == 0 {
		out.StuckMargin = 30 * time.Second
	}
	if out.Concurrency == 0 {
		out.Concurrency = 4
	}
	if out.SweepTimeout == 0 {
		out.SweepTimeout = defaultSweepTimeout
	}
	if out.RetryLookupAfter == 0 {
		out.RetryLookupAfter = time.Minute
	}
	if out.Observer == nil {
		out.Observer = nopObserver{}
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out
}

func (c *Config) validate() error {
	switch {
	case c.Interval < time.Second:
		return fmt.Errorf("reconcile: Interval %s is too short; use 1s or more", c.Interval)
	case c.BatchSize < 1 || c.BatchSize > 10000:
		return fmt.Errorf("reconcile: BatchSize %d out of range; use 1 to 10000", c.BatchSize)
	case c.MaxAttempts < 1:
		return fmt.Errorf("reconcile: MaxAttempts %d must be at least 1", c.MaxAttempts)
	case c.StuckMargin < 0:
		return errors.New("reconcile: StuckMargin must not be negative")
	case c.Concurrency < 1 || c.Concurrency > 256:
		return errors.New("reconcile: Concurrency must be 1 to 256")
	case c.SweepTimeout < 0:
		return errors.New("reconcile: SweepTimeout must not be negative")
	case c.RetryLookupAfter < 0:
		return errors.New("reconcile: RetryLookupAfter must not be negative")
	}
	return nil
}

// Reconciler resolves ops whose outcome is unknown from the vendor's own records.
type Reconciler struct {
	cfg Config
	ob  atomic.Pointer[outbox.Outbox]
}

// New builds a Reconciler. cfg.Outbox may be nil, to break the circle between
// outbox.Config (which takes the sweeper's worker and periodic job) and the Outbox the
// sweeper needs: build the Reconciler, pass Register and PeriodicJob to outbox.New, then
// call SetOutbox with the result (see the package example).
func New(cfg Config) (*Reconciler, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	r := &Reconciler{cfg: c}
	if c.Outbox != nil {
		r.ob.Store(c.Outbox)
	}
	return r, nil
}

// SetOutbox gives the Reconciler its Outbox when New got none. Call it before the
// Outbox starts working jobs.
func (r *Reconciler) SetOutbox(ob *outbox.Outbox) { r.ob.Store(ob) }

func (r *Reconciler) outbox() (*outbox.Outbox, error) {
	ob := r.ob.Load()
	if ob == nil {
		return nil, errors.New("reconcile: no Outbox: set Config.Outbox or call SetOutbox before sweeping")
	}
	return ob, nil
}

func (r *Reconciler) logger(ob *outbox.Outbox) *slog.Logger {
	if r.cfg.Logger != nil {
		return r.cfg.Logger
	}
	return ob.Link().Logger
}

// SweepArgs is the River job of one sweep.
type SweepArgs struct {
	// Soon marks a sweep asked for by a takeover (SweepSoonTx), so that the periodic
	// sweep's uniqueness never skips it.
	Soon bool `json:"soon,omitempty"`
}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return "oncebox.reconcile_sweep" }

// InsertOpts puts sweeps on QueueName. The periodic job adds uniqueness by period.
func (SweepArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: QueueName} }

type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	r *Reconciler
}

// Timeout bounds one sweep.
func (w *sweepWorker) Timeout(*river.Job[SweepArgs]) time.Duration { return w.r.cfg.SweepTimeout }

// Work runs one sweep.
func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	_, err := w.r.SweepOnce(ctx)
	return err
}

// Register adds the sweep worker to workers; pass it as outbox.Config.ExtraWorkers.
func (r *Reconciler) Register(workers *river.Workers) error {
	if err := river.AddWorkerSafely(workers, &sweepWorker{r: r}); err != nil {
		return fmt.Errorf("reconcile: register sweep worker: %w", err)
	}
	return nil
}

// SweepSoonTx inserts a sweep in tx: a dispatch run handed an op to the reconciler
// after a takeover (outbox.Config.HandOver), and the op should not wait for the next
// periodic sweep. Each hand-over inserts its own: a sweep unique per period could run
// before a hand-over of the same period commits, leaving that op to the periodic sweep;
// a sweep that finds nothing due costs one query.
func SweepSoonTx(ctx context.Context, client *river.Client[pgx.Tx], tx pgx.Tx) error {
	if _, err := client.InsertTx(ctx, tx, SweepArgs{Soon: true}, nil); err != nil {
		return fmt.Errorf("reconcile: insert a sweep: %w", err)
	}
	return nil
}

// PeriodicJob is the sweep every Interval, also run when the client starts; pass it in
// outbox.Config.PeriodicJobs. Sweeps are unique per interval, so several processes
// running it insert one sweep per period between them.
func (r *Reconciler) PeriodicJob() *river.PeriodicJob {
	interval := r.cfg.Interval
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) {
			return SweepArgs{}, &river.InsertOpts{Queue: QueueName, UniqueOpts: river.UniqueOpts{ByPeriod: interval}}
		},
		&river.PeriodicJobOpts{RunOnStart: true})
}

// CheckSoon makes the unknown ops among opIDs due for the next sweep, whatever check
// time an earlier decision set: new evidence (a vendor event) arrived for them. Ids that
// are not uuids are skipped; ops in any other status are left alone.
func (r *Reconciler) CheckSoon(ctx context.Context, opIDs []string) error {
	ob, err := r.outbox()
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(opIDs))
	for _, id := range opIDs {
		if protocol.IsOpID(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if err := ob.Link().Ops.CheckSoon(ctx, ids); err != nil {
		return fmt.Errorf("reconcile: check soon: %w", err)
	}
	return nil
}
