package purge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/reconcile"
)

// TestPurgeArgsKeepTheirWireNames: the job kind and queue are stored in river_job rows
// that wait across a rolling upgrade; they stay as they were when the purge lived in
// outbox.
func TestPurgeArgsKeepTheirWireNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "oncebox.purge", PurgeArgs{}.Kind())
	require.Equal(t, "oncebox_maintenance", PurgeArgs{}.InsertOpts().Queue)
	require.Equal(t, reconcile.MaintenanceQueue, MaintenanceQueue)
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.withDefaults()
	require.Equal(t, Config{Interval: time.Minute, BatchSize: 1000, TombstoneTTL: 30 * 24 * time.Hour}, c)
	c = Config{Interval: time.Hour, BatchSize: 5, TombstoneTTL: time.Second}.withDefaults()
	require.Equal(t, Config{Interval: time.Hour, BatchSize: 5, TombstoneTTL: time.Second}, c)
}

func TestNewRefusesMissingDeps(t *testing.T) {
	t.Parallel()
	_, err := New(Config{}, Deps{})
	require.ErrorContains(t, err, "purge: Deps needs Pool, Ops, Approvals and Logger")
}
