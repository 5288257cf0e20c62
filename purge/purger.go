package purge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/oncebox/oncebox/internal/opstate"
)

// MaintenanceQueue is the River queue of oncebox's periodic jobs (the purge, the
// reconciler's sweep). reconcile.MaintenanceQueue is the same name.
const MaintenanceQueue = "oncebox_maintenance"

// Config configures the TTL purge of settled ops. outbox.Config.Purge holds it.
type Config struct {
	// Interval is how often the purge runs. Defaults to 1 minute.
	Interval time.Duration
	// BatchSize bounds the ops looked at (deleted, or kept for later) per statement.
	// Defaults to 1,000.
	BatchSize int
	// TombstoneTTL is how long a purged op's key and fingerprint are kept, so that a
	// reuse of the key is counted as a key-expiry collision. Defaults to 30 days.
	TombstoneTTL time.Duration
}

func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = time.Minute
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.TombstoneTTL == 0 {
		c.TombstoneTTL = 30 * 24 * time.Hour
	}
	return c
}

// Stats says what one purge did.
type Stats struct {
	Ops        int
	Batches    int
	Tombstones int
	// Deferred counts the ops looked at and kept: their expires_at had passed but not
	// their expiry (opstate.PurgeResult.Deferred).
	Deferred int
	// KeyWindows counts the closed key windows (outbox.KeyInWindow) deleted.
	KeyWindows int
}

// Approvals rejects the ops whose wait for approval ran out, so that their rows are
// terminal for a later purge. *outbox.Outbox satisfies it.
type Approvals interface {
	ExpireApprovals(ctx context.Context) (int, error)
}

// Deps is what the purge uses of the Outbox that runs it; outbox.New hands it over.
// Every field is required.
type Deps struct {
	// Pool holds oncebox's tables.
	Pool *pgxpool.Pool
	// Ops deletes the expired terminal ops and leaves their tombstones.
	Ops *opstate.Machine
	// Approvals expires the waits for approval before each periodic purge.
	Approvals Approvals
	// Logger receives the purge's log lines.
	Logger *slog.Logger
}

func (d *Deps) validate() error {
	if d.Pool == nil || d.Ops == nil || d.Approvals == nil || d.Logger == nil {
		return errors.New("purge: Deps needs Pool, Ops, Approvals and Logger")
	}
	return nil
}

// Purger runs the TTL purge. The Outbox owns it: its periodic job runs on the Outbox's
// River client.
type Purger struct {
	cfg  Config
	deps Deps
}

// New builds a Purger from cfg, with its defaults filled in, and the Outbox's deps.
func New(cfg Config, deps Deps) (*Purger, error) {
	if err := deps.validate(); err != nil {
		return nil, err
	}
	return &Purger{cfg: cfg.withDefaults(), deps: deps}, nil
}

// Purge deletes expired terminal ops in batches of Config.BatchSize, leaving tombstones,
// and deletes tombstones past their own TTL and closed key windows.
func (p *Purger) Purge(ctx context.Context) (Stats, error) {
	r, err := p.deps.Ops.Purge(ctx, p.cfg.BatchSize, p.cfg.TombstoneTTL)
	st := Stats{Ops: r.Ops, Batches: r.Batches, Tombstones: r.Tombstones, Deferred: r.Deferred}
	if err != nil {
		return st, fmt.Errorf("purge: %w", err)
	}
	tag, err := p.deps.Pool.Exec(ctx, sqlPurgeKeyWindows)
	if err != nil {
		return st, fmt.Errorf("purge: purge key windows: %w", err)
	}
	st.KeyWindows = int(tag.RowsAffected())
	if st.Ops > 0 || st.Tombstones > 0 || st.KeyWindows > 0 || st.Deferred > 0 {
		p.deps.Logger.Info("purged expired ops", slog.Int("ops", st.Ops), slog.Int("batches", st.Batches), slog.Int("deferred", st.Deferred),
			slog.Int("tombstones_deleted", st.Tombstones), slog.Int("key_windows_deleted", st.KeyWindows))
	}
	return st, nil
}

// PurgeArgs is the River periodic job that runs Purge.
type PurgeArgs struct{}

// Kind implements river.JobArgs. The kind predates the package and stays: jobs of it
// wait in river_job across a rolling upgrade.
func (PurgeArgs) Kind() string { return "oncebox.purge" }

// InsertOpts puts the purge on the maintenance queue.
func (PurgeArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: MaintenanceQueue} }

type purgeWorker struct {
	river.WorkerDefaults[PurgeArgs]
	p *Purger
}

func (w *purgeWorker) Work(ctx context.Context, _ *river.Job[PurgeArgs]) error {
	// Ops whose wait for approval ran out are rejected first, so that their rows are
	// terminal for a later purge; reads expire them too, without waiting for this.
	if _, err := w.p.deps.Approvals.ExpireApprovals(ctx); err != nil {
		return err
	}
	if _, err := w.p.deps.Pool.Exec(ctx, sqlPurgeBudgetUsage); err != nil {
		return fmt.Errorf("purge: purge budget windows: %w", err)
	}
	_, err := w.p.Purge(ctx)
	return err
}

// Register adds the purge worker to workers and returns the periodic purge to add to
// the River client's periodic jobs. It runs at start and every Config.Interval.
func (p *Purger) Register(workers *river.Workers) ([]*river.PeriodicJob, error) {
	if err := river.AddWorkerSafely(workers, &purgeWorker{p: p}); err != nil {
		return nil, fmt.Errorf("purge: register purge worker: %w", err)
	}
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(p.cfg.Interval),
		func() (river.JobArgs, *river.InsertOpts) { return PurgeArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})}, nil
}
