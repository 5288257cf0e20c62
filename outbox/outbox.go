package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/notify"
	"github.com/oncebox/oncebox/purge"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/steps"
	"github.com/oncebox/oncebox/vendoraccount"
	"github.com/oncebox/oncebox/vendorapi"
)

// Outbox enqueues ops and, when configured with vendors, dispatches them.
type Outbox struct {
	cfg     Config
	pool    *pgxpool.Pool
	river   *river.Client[pgx.Tx]
	vendors map[string]vendorapi.Vendor
	logger  *slog.Logger
	sealer  *seal.Sealer
	// accounts opens the keys of the ops sent with their tenant's own key.
	accounts *vendoraccount.Settings
	// fpKey keys the fingerprints of tools with Redact (nil without a seal key).
	fpKey []byte
	// ops makes every status change of an op (internal/opstate owns the table).
	ops *opstate.Machine
	// tracer is nil when tracing is off.
	tracer trace.Tracer
	// reconciler settles unknown ops; its worker and periodic job run on river.
	reconciler *reconcile.Reconciler
	// steps runs composite ops' steps; its worker runs on river.
	steps *steps.Runner
	// notifier posts approval notifications; nil without Config.Notify.
	notifier *notify.Notifier
	// group commits the enqueues that arrive together; nil without Config.GroupCommit.
	group *committer
	// dispatcher sends ops to their vendors; its worker runs on river.
	dispatcher *dispatch.Dispatcher
}

// VendorSettings returns the tenants' vendor settings, stored in the outbox's pool and
// sealed with its seal key.
func (ob *Outbox) VendorSettings() *vendoraccount.Settings { return ob.accounts }

// New builds an Outbox and its River client. Call Start to work jobs.
func New(cfg Config) (*Outbox, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	ob, err := newOutbox(c)
	if err != nil {
		return nil, err
	}
	if err := ob.newDispatcher(); err != nil {
		return nil, err
	}
	workers, err := ob.registerWorkers(&c)
	if err != nil {
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(c.Pool), riverConfig(&c, workers))
	if err != nil {
		return nil, fmt.Errorf("outbox: river client: %w", err)
	}
	ob.river = client
	return ob, nil
}

// newOutbox builds the Outbox of a valid configuration, without its River client: its
// op state machine, vendors, sealer and reconciler.
func newOutbox(c Config) (*Outbox, error) {
	ob := &Outbox{cfg: c, pool: c.Pool, vendors: map[string]vendorapi.Vendor{}, logger: c.Logger}
	if c.TracerProvider != nil {
		ob.tracer = c.TracerProvider.Tracer(tracing.ScopeName)
	}
	ob.ops = opstate.New(opstate.Config{Pool: c.Pool, Logger: c.Logger, Observe: c.Observer.Transition,
		TracerProvider: c.TracerProvider,
		InsertJob: func(ctx context.Context, tx pgx.Tx, opID, vendor string) error {
			return ob.dispatcher.InsertReleaseJobTx(ctx, tx, opID, vendor)
		}})
	if err := ob.newSteps(); err != nil {
		return nil, err
	}
	if c.GroupCommit.on() {
		ob.group = newCommitter(ob, c.GroupCommit)
	}
	for _, v := range c.Vendors {
		ob.vendors[v.Name()] = v
	}
	if len(c.SealKey) > 0 {
		s, err := seal.New(c.SealKey)
		if err != nil {
			return nil, err
		}
		ob.sealer = s
		ob.fpKey = fingerprintKey(c.SealKey)
		if ob.accounts, err = vendoraccount.New(c.Pool, c.SealKey); err != nil {
			return nil, err
		}
		if err := ob.newReconciler(); err != nil {
			return nil, err
		}
		return ob, nil
	}
	ob.accounts, _ = vendoraccount.New(c.Pool, nil) // without a seal key it cannot fail
	if err := ob.newReconciler(); err != nil {
		return nil, err
	}
	for _, name := range c.Tools.Names() {
		if t, _ := c.Tools.Lookup(name); t.Redact != nil {
			c.Logger.Warn("no seal key: arguments of tools with redaction are stored in clear until their op is terminal; set a seal key to store only the redacted form",
				slog.String("tool", name))
		}
	}
	return ob, nil
}

// registerWorkers registers the workers of every job the Outbox runs (dispatch, the
// reconciler's sweep, purge, notify and the caller's extra ones) and adds the sweep's
// and the purge's periodic jobs to c.PeriodicJobs.
func (ob *Outbox) registerWorkers(c *Config) (*river.Workers, error) {
	workers := river.NewWorkers()
	if err := ob.dispatcher.Register(workers); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	if err := ob.steps.Register(workers); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	periodic, err := ob.reconciler.Register(workers)
	if err != nil {
		return nil, err
	}
	c.PeriodicJobs = append(c.PeriodicJobs, periodic...)
	if c.Purge != nil {
		p, err := purge.New(*c.Purge, ob.purgeDeps())
		if err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
		periodic, err := p.Register(workers)
		if err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
		c.PeriodicJobs = append(c.PeriodicJobs, periodic...)
	}
	if err := ob.registerNotify(c, workers); err != nil {
		return nil, err
	}
	if c.ExtraWorkers != nil {
		if err := c.ExtraWorkers(workers); err != nil {
			return nil, fmt.Errorf("outbox: register extra workers: %w", err)
		}
	}
	return workers, nil
}

// reindexedIndexes is River's default reindexer list without the GIN indexes on
// river_job's args and metadata, which migration 038 drops (v0.3.0): River would warn on
// every run that they are missing. On a schema before 038 they stay, unreindexed.
func reindexedIndexes() []string {
	return slices.DeleteFunc(river.ReindexerIndexNamesDefault(), func(name string) bool {
		return name == "river_job_args_index" || name == "river_job_metadata_index"
	})
}

// riverConfig is the River client's configuration: in a process that works jobs, a
// queue per vendor (unless NoDispatch), the maintenance queue, the notify queue and the
// caller's extra queues, and the periodic jobs.
func riverConfig(c *Config, workers *river.Workers) *river.Config {
	// River's client-wide job timeout must not exceed RescueStuckJobsAfter; the
	// dispatch worker sets each vendor's own through Timeout.
	maxTimeout := time.Duration(0)
	for _, q := range c.Queues {
		maxTimeout = max(maxTimeout, q.JobTimeout)
	}
	if maxTimeout == 0 {
		maxTimeout = min(time.Minute, c.RescueStuckJobsAfter/2)
	}
	rc := &river.Config{
		JobTimeout:           maxTimeout,
		Workers:              workers,
		Logger:               c.Logger,
		ID:                   c.ClientID,
		RescueStuckJobsAfter: c.RescueStuckJobsAfter,
		FetchCooldown:        c.FetchCooldown,
		FetchPollInterval:    c.FetchPollInterval,
		MaxAttempts:          c.riverMaxAttempts(),
		ReindexerIndexNames:  reindexedIndexes(),
	}
	if !*c.Work {
		return rc
	}
	rc.Queues = map[string]river.QueueConfig{}
	if !c.NoDispatch {
		for name, q := range c.Queues {
			rc.Queues[dispatch.QueueName(name)] = river.QueueConfig{MaxWorkers: q.MaxWorkers}
		}
		rc.Queues[steps.Queue] = river.QueueConfig{MaxWorkers: 10}
	}
	rc.Queues[reconcile.MaintenanceQueue] = river.QueueConfig{MaxWorkers: 2}
	if c.Notify != nil {
		rc.Queues[notify.Queue] = river.QueueConfig{MaxWorkers: 5}
	}
	for name, q := range c.ExtraQueues {
		rc.Queues[name] = q
	}
	rc.PeriodicJobs = c.PeriodicJobs
	return rc
}

// Ping checks that the Outbox's database answers a query, for health checks.
func (ob *Outbox) Ping(ctx context.Context) error {
	var one int
	if err := ob.pool.QueryRow(ctx, sqlPing).Scan(&one); err != nil {
		return fmt.Errorf("outbox: ping: %w", err)
	}
	return nil
}

// Tools returns the tool registry.
func (ob *Outbox) Tools() *Registry { return ob.cfg.Tools }

// jobTimeout returns the dispatch job timeout of a vendor's queue.
func (ob *Outbox) jobTimeout(vendor string) time.Duration {
	if q, ok := ob.cfg.Queues[vendor]; ok {
		return q.JobTimeout
	}
	return dispatch.DefaultJobTimeout
}

// Start starts working jobs (when the Outbox works jobs). A process with a liveness
// lock (Config.ClientID) first waits until the lock is held, for at most 5 seconds (see
// dispatch.Dispatcher.Start). Ending ctx does not stop the workers: Stop does, letting
// running dispatches finish first.
func (ob *Outbox) Start(ctx context.Context) error {
	if !*ob.cfg.Work {
		return nil
	}
	// River hard-stops (cancelling running dispatches) when its start context ends;
	// only Stop, with its grace, may end the workers.
	ob.dispatcher.Start(ctx)
	if err := ob.river.Start(context.WithoutCancel(ctx)); err != nil {
		ob.dispatcher.Stop()
		return fmt.Errorf("outbox: start river: %w", err)
	}
	return nil
}

// ClientID is this process's River client id.
func (ob *Outbox) ClientID() string { return ob.cfg.ClientID }

// Stop stops fetching jobs and waits for running dispatches to finish, until ctx is
// done; then it cancels the ones still running (they record an outcome, so nothing is
// lost) and waits for them to return.
func (ob *Outbox) Stop(ctx context.Context) error {
	if !*ob.cfg.Work {
		return nil
	}
	defer ob.dispatcher.Stop()
	err := ob.river.Stop(ctx)
	if err == nil {
		return nil
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("outbox: stop river: %w", err)
	}
	ob.logger.Warn("grace period over; cancelling running dispatches")
	hard, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := ob.river.StopAndCancel(hard); err != nil {
		return fmt.Errorf("outbox: stop and cancel river: %w", err)
	}
	return nil
}
