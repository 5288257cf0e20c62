package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/oncebox/oncebox/reconcile"
)

// PurgeConfig configures the TTL purge of settled ops.
type PurgeConfig struct {
	// Interval is how often the purge runs. Defaults to 1 minute.
	Interval time.Duration
	// BatchSize bounds the ops deleted per statement. Defaults to 1,000.
	BatchSize int
	// TombstoneTTL is how long a purged op's key and fingerprint are kept, so that a
	// reuse of the key is counted as a key-expiry collision. Defaults to 30 days.
	TombstoneTTL time.Duration
}

func (c PurgeConfig) withDefaults() PurgeConfig {
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

// PurgeStats says what one purge did.
type PurgeStats struct {
	Ops        int
	Batches    int
	Tombstones int
	// KeyWindows counts the closed key windows (KeyInWindow) deleted.
	KeyWindows int
}

// Purge deletes expired terminal ops in batches of cfg.BatchSize, leaving tombstones,
// and deletes tombstones past their own TTL and closed key windows.
func (ob *Outbox) Purge(ctx context.Context, cfg PurgeConfig) (PurgeStats, error) {
	cfg = cfg.withDefaults()
	r, err := ob.ops.Purge(ctx, cfg.BatchSize, cfg.TombstoneTTL)
	st := PurgeStats{Ops: r.Ops, Batches: r.Batches, Tombstones: r.Tombstones}
	if err != nil {
		return st, fmt.Errorf("outbox: %w", err)
	}
	tag, err := ob.pool.Exec(ctx, sqlPurgeKeyWindows)
	if err != nil {
		return st, fmt.Errorf("outbox: purge key windows: %w", err)
	}
	st.KeyWindows = int(tag.RowsAffected())
	if st.Ops > 0 || st.Tombstones > 0 || st.KeyWindows > 0 {
		ob.logger.Info("purged expired ops", slog.Int("ops", st.Ops), slog.Int("batches", st.Batches),
			slog.Int("tombstones_deleted", st.Tombstones), slog.Int("key_windows_deleted", st.KeyWindows))
	}
	return st, nil
}

// MaintenanceQueue is the River queue of oncebox's periodic jobs (purge, reconcile sweep).
const MaintenanceQueue = reconcile.MaintenanceQueue

// PurgeArgs is the River periodic job that runs Purge.
type PurgeArgs struct{}

// Kind implements river.JobArgs.
func (PurgeArgs) Kind() string { return "oncebox.purge" }

// InsertOpts puts the purge on the maintenance queue.
func (PurgeArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: MaintenanceQueue} }

type purgeWorker struct {
	river.WorkerDefaults[PurgeArgs]
	ob  *Outbox
	cfg PurgeConfig
}

func (w *purgeWorker) Work(ctx context.Context, _ *river.Job[PurgeArgs]) error {
	// Ops whose wait for approval ran out are rejected first, so that their rows are
	// terminal for a later purge; reads expire them too, without waiting for this.
	if _, err := w.ob.ExpireApprovals(ctx); err != nil {
		return err
	}
	if _, err := w.ob.pool.Exec(ctx, sqlPurgeBudgetUsage); err != nil {
		return fmt.Errorf("outbox: purge budget windows: %w", err)
	}
	_, err := w.ob.Purge(ctx, w.cfg)
	return err
}
