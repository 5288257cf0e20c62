package fleet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/fleet"
	"github.com/oncebox/oncebox/migrations"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestMixedWhileAnOlderProcessIsLive: a process sees a mixed window while a registered
// process of an older protocol beats, or while an unregistered process (v0.1.0) runs a
// job, and a clean one a lease after the last of them is gone.
func TestMixedWhileAnOlderProcessIsLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	lease := 700 * time.Millisecond
	join := func(id string, protocol int) *fleet.Member {
		m, err := fleet.Join(ctx, fleet.Config{Pool: pool, ID: id, Protocol: protocol, Beat: 100 * time.Millisecond, Lease: lease})
		require.NoError(t, err)
		return m
	}
	run := func(m *fleet.Member) context.CancelFunc {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = m.Run(rctx) }()
		return func() { cancel(); <-done }
	}

	a := join("a", 0)
	require.False(t, a.Mixed(), "alone: clean runs")
	stopA := run(a)
	defer stopA()

	old := join("old", fleet.ProtocolCleanRuns)
	require.True(t, old.Mixed() == false, "the old process sees no older one")
	stopOld := run(old)
	require.Eventually(t, a.Mixed, 5*time.Second, 20*time.Millisecond, "an older registered process is live")
	stopOld() // marks it stopped
	require.Eventually(t, func() bool { return !a.Mixed() }, 5*time.Second, 20*time.Millisecond, "the older process stopped")

	// v0.1.0 does not register: a running job whose last attempt names no registered
	// process is one of its.
	_, err := pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, attempt, attempted_at, attempted_by)
		VALUES ('{}', 'dispatch', 5, 'oncebox_webhook', 'running', 1, now(), '{host_2026_12_01T00_00_00}')`)
	require.NoError(t, err)
	require.Eventually(t, a.Mixed, 5*time.Second, 20*time.Millisecond, "an unregistered process runs a job")
	_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now()`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !a.Mixed() }, 5*time.Second, 20*time.Millisecond, "its job finished")

	// A running job of a registered process is no evidence.
	_, err = pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, attempt, attempted_at, attempted_by)
		VALUES ('{}', 'dispatch', 5, 'oncebox_webhook', 'running', 1, now(), '{x,a}')`)
	require.NoError(t, err)
	time.Sleep(3 * lease)
	require.False(t, a.Mixed())

	live, err := fleet.Live(ctx, pool, lease)
	require.NoError(t, err)
	require.Len(t, live, 1)
	require.Equal(t, "a", live[0].ID)
	require.Equal(t, fleet.Protocol, live[0].Protocol)
	require.Equal(t, migrations.Latest(), live[0].Migration)
}

// TestRunStopsOnAContractMigrationItDoesNotKnow: a contract migration applied while a
// process runs stops it with the schema refusal.
func TestRunStopsOnAContractMigrationItDoesNotKnow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	m, err := fleet.Join(ctx, fleet.Config{Pool: pool, ID: "p", Beat: 50 * time.Millisecond})
	require.NoError(t, err)
	done := make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { done <- m.Run(rctx) }()
	_, err = pool.Exec(ctx, "INSERT INTO oncebox_migration (version, name, contract) VALUES ($1, 'next', true)", migrations.Latest()+1)
	require.NoError(t, err)
	select {
	case err := <-done:
		var se *migrations.SchemaError
		require.True(t, errors.As(err, &se), "got %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the process kept running on a schema it cannot run on")
	}
	_, err = fleet.Join(ctx, fleet.Config{Pool: pool, ID: "q"})
	require.Error(t, err, "and a new one refuses to start")
}
