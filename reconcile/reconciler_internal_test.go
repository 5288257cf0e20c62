package reconcile

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/vendorapi"
)

// TestSweepArgsKeepTheirWireNames: the job kind and queue are stored in river_job, where
// jobs of an older release wait during a rolling upgrade; the package's name moved, they
// must not.
func TestSweepArgsKeepTheirWireNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "oncebox.reconcile_sweep", SweepArgs{}.Kind())
	require.Equal(t, "oncebox_maintenance", SweepArgs{}.InsertOpts().Queue)
	require.Equal(t, "oncebox_maintenance", MaintenanceQueue)
}

type noTools struct{}

func (noTools) Lookup(string) (vendorapi.Tool, bool) { return vendorapi.Tool{}, false }

type noAccounts struct{}

func (noAccounts) Account(context.Context, int64, string, string) (vendorapi.Account, error) {
	return vendorapi.Account{}, nil
}

func testDeps() Deps {
	pool := &pgxpool.Pool{} // never used: New only keeps it
	return Deps{Pool: pool, Ops: opstate.New(opstate.Config{Pool: pool}), JobTimeout: func(string) time.Duration { return time.Second },
		Accounts: noAccounts{}, Tools: noTools{}, Logger: slog.New(slog.DiscardHandler)}
}

// TestNewFillsDefaultsAndRefusesBadSettings: New applies Config's documented defaults,
// refuses settings out of range with an error naming the field, and refuses missing deps.
func TestNewFillsDefaultsAndRefusesBadSettings(t *testing.T) {
	t.Parallel()
	r, err := New(Config{}, testDeps())
	require.NoError(t, err)
	c := r.cfg
	require.Equal(t, 30*time.Second, c.Interval)
	require.Equal(t, 100, c.BatchSize)
	require.Equal(t, DefaultMaxAttempts, c.MaxAttempts)
	require.Equal(t, 30*time.Second, c.StuckMargin)
	require.Equal(t, 4, c.Concurrency)
	require.Equal(t, 90*time.Second, c.Timeout)
	require.Equal(t, time.Minute, c.RetryLookupAfter)
	require.NotNil(t, c.Observer)
	require.NotNil(t, c.Now)
	require.NotNil(t, r.deps.Vendors)

	for field, cfg := range map[string]Config{
		"Interval":         {Interval: time.Millisecond},
		"BatchSize":        {BatchSize: 10001},
		"MaxAttempts":      {MaxAttempts: -1},
		"StuckMargin":      {StuckMargin: -time.Second},
		"Concurrency":      {Concurrency: 257},
		"Timeout":          {Timeout: -time.Second},
		"RetryLookupAfter": {RetryLookupAfter: -time.Second},
	} {
		_, err := New(cfg, testDeps())
		require.ErrorContains(t, err, "reconcile: Config."+field, field)
	}

	deps := testDeps()
	deps.Tools = nil
	_, err = New(Config{}, deps)
	require.ErrorContains(t, err, "reconcile: Deps needs")
}
