package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/vendorapi"
)

// MaintenanceQueue is the River queue of oncebox's periodic jobs (the sweep, the purge).
const MaintenanceQueue = "oncebox_maintenance"

// DefaultMaxAttempts is Config.MaxAttempts' default, the same as dispatch.DefaultMaxAttempts.
const DefaultMaxAttempts = 10

// defaultTimeout bounds one sweep run as a River job. It stays below the default
// RescueStuckJobsAfter (2 minutes), so River never rescues a sweep that is still
// running; ops left unvisited are picked up by the next sweep.
const defaultTimeout = 90 * time.Second

// Observer is told about the reconciler's decisions, for metrics. Every method must be
// quick and safe for concurrent use.
type Observer interface {
	// Decision is called once per decision taken about an op, with one of the
	// decision constants (Succeeded, Resend, ...).
	Decision(vendor, decision string)
	// Duplicate is called when the vendor holds two or more objects for one op.
	Duplicate(vendor string)
}

type nopObserver struct{}

func (nopObserver) Decision(string, string) {}
func (nopObserver) Duplicate(string)        {}

// Config configures the reconciler, which settles ops whose outcome is unknown from the
// vendor's own records (see Reconciler.Sweep). outbox.Config.Reconcile holds it.
type Config struct {
	// Periodic runs the sweep every Interval as a River periodic job on
	// MaintenanceQueue, in a process that works jobs, and has a dispatch run that hands
	// an op to the reconciler after a takeover insert a sweep at once. Defaults to
	// false: the Outbox sweeps only when ReconcileOnce is called.
	Periodic bool
	// Interval is how often the periodic sweep runs (ONCEBOX_RECONCILE_INTERVAL).
	// Defaults to 30 seconds.
	Interval time.Duration
	// BatchSize is how many unknown ops one sweep looks up at most. Defaults to 100.
	BatchSize int
	// ResendOnNone says, per vendor name, what to do when the vendor holds no object for
	// an op after its lookup lag: resend (true) or hand the op to a person (false).
	// Defaults to true for every vendor missing from the map.
	ResendOnNone map[string]bool
	// MaxAttempts is how many dispatch attempts an op may have had for the reconciler
	// to still resend it after finding nothing; past it the op goes to needs_review, so
	// an op that keeps ending unknown does not loop forever. Defaults to
	// DefaultMaxAttempts (10).
	MaxAttempts int
	// StuckMargin is how long past its vendor's job timeout an op may stay in
	// dispatching, with no dispatch job running, before the reconciler moves it to
	// unknown. Defaults to 30 seconds.
	StuckMargin time.Duration
	// Concurrency is how many ops one sweep looks up at once. Vendors' own rate limits
	// still apply (SendGrid's activity limiter is shared by the process). Defaults to 4.
	Concurrency int
	// Timeout bounds one sweep run; the ops a sweep leased but did not reach (its
	// process died, or the timeout hit) come back this long after it started. Keep it
	// below RescueStuckJobsAfter. Defaults to 90 seconds.
	Timeout time.Duration
	// RetryLookupAfter is how long the reconciler waits after a failed lookup (rate
	// limited, network) before asking again. Defaults to 1 minute.
	RetryLookupAfter time.Duration
	// Observer receives decisions and duplicates for metrics. Defaults to one that does
	// nothing.
	Observer Observer
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
		out.MaxAttempts = DefaultMaxAttempts
	}
	if out.StuckMargin == 0 {
		out.StuckMargin = 30 * time.Second
	}
	if out.Concurrency == 0 {
		out.Concurrency = 4
	}
	if out.Timeout == 0 {
		out.Timeout = defaultTimeout
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
		return fmt.Errorf("reconcile: Config.Interval %s is too short; use 1s or more", c.Interval)
	case c.BatchSize < 1 || c.BatchSize > 10000:
		return fmt.Errorf("reconcile: Config.BatchSize %d out of range; use 1 to 10000", c.BatchSize)
	case c.MaxAttempts < 1:
		return fmt.Errorf("reconcile: Config.MaxAttempts %d must be at least 1", c.MaxAttempts)
	case c.StuckMargin < 0:
		return errors.New("reconcile: Config.StuckMargin must not be negative")
	case c.Concurrency < 1 || c.Concurrency > 256:
		return errors.New("reconcile: Config.Concurrency must be 1 to 256")
	case c.Timeout < 0:
		return errors.New("reconcile: Config.Timeout must not be negative")
	case c.RetryLookupAfter < 0:
		return errors.New("reconcile: Config.RetryLookupAfter must not be negative")
	}
	return nil
}

// Tools looks a tool up by name, for the redaction of a terminal op's args and result.
// *outbox.Registry satisfies it.
type Tools interface {
	Lookup(name string) (vendorapi.Tool, bool)
}

// Accounts opens the vendor account an op was accepted under. *vendoraccount.Settings
// satisfies it.
type Accounts interface {
	Account(ctx context.Context, tenantID int64, vendor, ref string) (vendorapi.Account, error)
}

// Deps is what the reconciler uses of the Outbox that runs it; outbox.New hands it over.
// Every field but Vendors (none: no lookup can be made) is required.
type Deps struct {
	// Pool holds oncebox's and River's tables.
	Pool *pgxpool.Pool
	// Ops makes every status change of an op.
	Ops *opstate.Machine
	// Vendors are the vendor adapters of this process, by name.
	Vendors map[string]vendorapi.Vendor
	// JobTimeout is the dispatch job timeout of a vendor's queue.
	JobTimeout func(vendor string) time.Duration
	// Accounts opens the keys of the ops sent with their tenant's own key.
	Accounts Accounts
	// Tools redacts what a terminal op stores.
	Tools Tools
	// Logger receives the reconciler's log lines.
	Logger *slog.Logger
}

func (d *Deps) validate() error {
	if d.Pool == nil || d.Ops == nil || d.JobTimeout == nil || d.Accounts == nil || d.Tools == nil || d.Logger == nil {
		return errors.New("reconcile: Deps needs Pool, Ops, JobTimeout, Accounts, Tools and Logger")
	}
	return nil
}

// Reconciler resolves ops whose outcome is unknown from the vendor's own records. The
// Outbox owns it: its worker and periodic job run on the Outbox's River client.
type Reconciler struct {
	cfg  Config
	deps Deps
}

// New builds a Reconciler from cfg, with its defaults filled in, and the Outbox's deps.
func New(cfg Config, deps Deps) (*Reconciler, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := deps.validate(); err != nil {
		return nil, err
	}
	if deps.Vendors == nil {
		deps.Vendors = map[string]vendorapi.Vendor{}
	}
	return &Reconciler{cfg: c, deps: deps}, nil
}

// SweepArgs is the River job of one sweep.
type SweepArgs struct {
	// Soon marks a sweep asked for by a takeover (HandOverTx), so that the periodic
	// sweep's uniqueness never skips it.
	Soon bool `json:"soon,omitempty"`
}

// Kind implements river.JobArgs. The kind predates the package's name and stays: jobs
// of it wait in river_job across a rolling upgrade.
func (SweepArgs) Kind() string { return "oncebox.reconcile_sweep" }

// InsertOpts puts sweeps on MaintenanceQueue. The periodic job adds uniqueness by period.
func (SweepArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: MaintenanceQueue} }

type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	r *Reconciler
}

// Timeout bounds one sweep.
func (w *sweepWorker) Timeout(*river.Job[SweepArgs]) time.Duration { return w.r.cfg.Timeout }

// Work runs one sweep.
func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	_, err := w.r.Sweep(ctx)
	return err
}

// Register adds the sweep worker to workers and returns the periodic sweep to add to
// the River client's periodic jobs, when the sweep runs periodically; otherwise it does
// nothing and returns nil.
func (r *Reconciler) Register(workers *river.Workers) ([]*river.PeriodicJob, error) {
	if !r.cfg.Periodic {
		return nil, nil
	}
	if err := river.AddWorkerSafely(workers, &sweepWorker{r: r}); err != nil {
		return nil, fmt.Errorf("reconcile: register sweep worker: %w", err)
	}
	return []*river.PeriodicJob{r.periodicJob()}, nil
}

// Inserter inserts a River job in the caller's transaction; *river.Client[pgx.Tx]
// satisfies it.
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// HandOverTx inserts a sweep in tx when the sweep runs in this process: a dispatch run
// handed an op to the reconciler after a takeover, and the op should not wait for the
// next periodic sweep. Each hand-over inserts its own: a sweep unique per period could
// run before a hand-over of the same period commits, leaving that op to the periodic
// sweep; a sweep that finds nothing due costs one query.
func (r *Reconciler) HandOverTx(ctx context.Context, tx pgx.Tx, client Inserter) error {
	if !r.cfg.Periodic {
		return nil
	}
	if _, err := client.InsertTx(ctx, tx, SweepArgs{Soon: true}, nil); err != nil {
		return fmt.Errorf("reconcile: insert a sweep: %w", err)
	}
	return nil
}

// periodicJob is the sweep every Interval, also run when the client starts. Sweeps are
// unique per interval, so several processes running it insert one sweep per period
// between them.
func (r *Reconciler) periodicJob() *river.PeriodicJob {
	interval := r.cfg.Interval
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) {
			return SweepArgs{}, &river.InsertOpts{Queue: MaintenanceQueue, UniqueOpts: river.UniqueOpts{ByPeriod: interval}}
		},
		&river.PeriodicJobOpts{RunOnStart: true})
}
