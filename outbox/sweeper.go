package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/oncebox/oncebox/protocol"
)

// defaultSweepTimeout bounds one sweep run as a River job. It stays below the default
// RescueStuckJobsAfter (2 minutes), so River never rescues a sweep that is still
// running; ops left unvisited are picked up by the next sweep.
const defaultSweepTimeout = 90 * time.Second

// SweepObserver is told about the sweeper's decisions, for metrics. Every method must be
// quick and safe for concurrent use.
type SweepObserver interface {
	// Decision is called once per decision taken about an op, with one of the Sweep*
	// decision constants.
	Decision(vendor, decision string)
	// Duplicate is called when the vendor holds two or more objects for one op.
	Duplicate(vendor string)
}

type nopSweepObserver struct{}

func (nopSweepObserver) Decision(string, string) {}
func (nopSweepObserver) Duplicate(string)        {}

// SweepConfig configures the sweeper, which settles ops whose outcome is unknown from
// the vendor's own records (see SweepOnce).
type SweepConfig struct {
	// Periodic runs the sweep every Interval as a River periodic job on
	// MaintenanceQueue, in a process that works jobs, and has a dispatch run that hands
	// an op to the sweeper after a takeover insert a sweep at once. Defaults to false:
	// the Outbox sweeps only when SweepOnce is called.
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
	// MaxAttempts is how many dispatch attempts an op may have had for the sweeper to
	// still resend it after finding nothing; past it the op goes to needs_review, so an
	// op that keeps ending unknown does not loop forever. Defaults to
	// DefaultMaxAttempts (10).
	MaxAttempts int
	// StuckMargin is how long past its vendor's job timeout an op may stay in
	// dispatching, with no dispatch job running, before the sweeper moves it to
	// unknown. Defaults to 30 seconds.
	StuckMargin time.Duration
	// Concurrency is how many ops one sweep looks up at once. Vendors' own rate limits
	// still apply (SendGrid's activity limiter is shared by the process). Defaults to 4.
	Concurrency int
	// Timeout bounds one sweep run; the ops a sweep leased but did not reach (its
	// process died, or the timeout hit) come back this long after it started. Keep it
	// below RescueStuckJobsAfter. Defaults to 90 seconds.
	Timeout time.Duration
	// RetryLookupAfter is how long the sweeper waits after a failed lookup (rate
	// limited, network) before asking again. Defaults to 1 minute.
	RetryLookupAfter time.Duration
	// Observer receives decisions and duplicates for metrics. Defaults to one that does
	// nothing.
	Observer SweepObserver
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
}

func (c *SweepConfig) withDefaults() SweepConfig {
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
		out.Timeout = defaultSweepTimeout
	}
	if out.RetryLookupAfter == 0 {
		out.RetryLookupAfter = time.Minute
	}
	if out.Observer == nil {
		out.Observer = nopSweepObserver{}
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out
}

func (c *SweepConfig) validate() error {
	switch {
	case c.Interval < time.Second:
		return fmt.Errorf("outbox: Sweep.Interval %s is too short; use 1s or more", c.Interval)
	case c.BatchSize < 1 || c.BatchSize > 10000:
		return fmt.Errorf("outbox: Sweep.BatchSize %d out of range; use 1 to 10000", c.BatchSize)
	case c.MaxAttempts < 1:
		return fmt.Errorf("outbox: Sweep.MaxAttempts %d must be at least 1", c.MaxAttempts)
	case c.StuckMargin < 0:
		return errors.New("outbox: Sweep.StuckMargin must not be negative")
	case c.Concurrency < 1 || c.Concurrency > 256:
		return errors.New("outbox: Sweep.Concurrency must be 1 to 256")
	case c.Timeout < 0:
		return errors.New("outbox: Sweep.Timeout must not be negative")
	case c.RetryLookupAfter < 0:
		return errors.New("outbox: Sweep.RetryLookupAfter must not be negative")
	}
	return nil
}

// sweeper resolves ops whose outcome is unknown from the vendor's own records. The
// Outbox owns it: its worker and periodic job run on the Outbox's River client.
type sweeper struct {
	cfg SweepConfig
	ob  *Outbox
}

// SweepArgs is the River job of one sweep.
type SweepArgs struct {
	// Soon marks a sweep asked for by a takeover (handOverTx), so that the periodic
	// sweep's uniqueness never skips it.
	Soon bool `json:"soon,omitempty"`
}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return "oncebox.reconcile_sweep" }

// InsertOpts puts sweeps on MaintenanceQueue. The periodic job adds uniqueness by period.
func (SweepArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: MaintenanceQueue} }

type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	s *sweeper
}

// Timeout bounds one sweep.
func (w *sweepWorker) Timeout(*river.Job[SweepArgs]) time.Duration { return w.s.cfg.Timeout }

// Work runs one sweep.
func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	_, err := w.s.sweepOnce(ctx)
	return err
}

// register adds the sweep worker to workers and the periodic sweep to the client's
// periodic jobs, when the sweep runs periodically.
func (s *sweeper) register(workers *river.Workers, c *Config) error {
	if !s.cfg.Periodic {
		return nil
	}
	if err := river.AddWorkerSafely(workers, &sweepWorker{s: s}); err != nil {
		return fmt.Errorf("outbox: register sweep worker: %w", err)
	}
	c.PeriodicJobs = append(c.PeriodicJobs, s.periodicJob())
	return nil
}

// handOverTx inserts a sweep in tx when the sweep runs in this process: a dispatch run
// handed an op to the sweeper after a takeover, and the op should not wait for the next
// periodic sweep. Each hand-over inserts its own: a sweep unique per period could run
// before a hand-over of the same period commits, leaving that op to the periodic sweep;
// a sweep that finds nothing due costs one query.
func (s *sweeper) handOverTx(ctx context.Context, tx pgx.Tx) error {
	if !s.cfg.Periodic {
		return nil
	}
	if _, err := s.ob.river.InsertTx(ctx, tx, SweepArgs{Soon: true}, nil); err != nil {
		return fmt.Errorf("outbox: insert a sweep: %w", err)
	}
	return nil
}

// periodicJob is the sweep every Interval, also run when the client starts. Sweeps are
// unique per interval, so several processes running it insert one sweep per period
// between them.
func (s *sweeper) periodicJob() *river.PeriodicJob {
	interval := s.cfg.Interval
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) {
			return SweepArgs{}, &river.InsertOpts{Queue: MaintenanceQueue, UniqueOpts: river.UniqueOpts{ByPeriod: interval}}
		},
		&river.PeriodicJobOpts{RunOnStart: true})
}

// CheckSoon makes the unknown ops among opIDs due for the next sweep, whatever check
// time an earlier decision set: new evidence (a vendor event) arrived for them. Ids that
// are not uuids are skipped; ops in any other status are left alone.
func (ob *Outbox) CheckSoon(ctx context.Context, opIDs []string) error {
	ids := make([]string, 0, len(opIDs))
	for _, id := range opIDs {
		if protocol.IsOpID(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if err := ob.ops.CheckSoon(ctx, ids); err != nil {
		return fmt.Errorf("outbox: check soon: %w", err)
	}
	return nil
}
