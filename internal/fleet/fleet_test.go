package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/fstest"
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

// TestAContractReleaseRollsOut: the two steps of a contract release with real members. Its
// binary refuses the schema until its expand migration is applied; Migrate applies that
// one and holds the contract migration while a process of the older release is live;
// the new binary joins the schema that lacks only its contract migration; once the older
// process stops, the contract migration runs, the new process goes on, and the older
// binary can no longer join.
func TestAContractReleaseRollsOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	all, err := migrations.All()
	require.NoError(t, err)
	l := migrations.Latest()
	next, err := migrations.Load(fstest.MapFS{
		fmt.Sprintf("%03d_old_table.up.sql", l+1): {Data: []byte("CREATE TABLE fleet_test_old (id int);\n")},
		fmt.Sprintf("%03d_drop_old.up.sql", l+2):  {Data: []byte(migrations.ContractMarker + "\nDROP TABLE fleet_test_old;\n")},
	})
	require.NoError(t, err)
	release := append(slices.Clip(all), next...)

	oldCtx, stopOld := context.WithCancel(ctx)
	defer stopOld()
	old, err := fleet.Join(ctx, fleet.Config{Pool: pool, ID: "old", Beat: 50 * time.Millisecond})
	require.NoError(t, err)
	oldDone := make(chan error, 1)
	go func() { oldDone <- old.Run(oldCtx) }()

	var se *migrations.SchemaError
	_, err = fleet.Join(ctx, fleet.Config{Pool: pool, ID: "early", Migrations: release})
	require.True(t, errors.As(err, &se), "its expand migration is not applied yet: %v", err)

	res, err := migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Migrations: release})
	var held *migrations.ContractHeldError
	require.True(t, errors.As(err, &held), "got %v", err)
	require.Equal(t, []int{l + 1}, res.Oncebox)
	require.Equal(t, "old", held.Processes[0].ID)
	require.Equal(t, l, held.Processes[0].Migration, "a member registers the highest migration it knows")

	newCtx, stopNew := context.WithCancel(ctx)
	defer stopNew()
	m, err := fleet.Join(ctx, fleet.Config{Pool: pool, ID: "new", Migrations: release, Beat: 50 * time.Millisecond})
	require.NoError(t, err, "a binary joins a schema that lacks only its own contract migration")
	newDone := make(chan error, 1)
	go func() { newDone <- m.Run(newCtx) }()

	stopOld()
	require.NoError(t, <-oldDone)
	res, err = migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Migrations: release})
	require.NoError(t, err, "the older process stopped: nothing holds the contract migration")
	require.Equal(t, []int{l + 2}, res.Oncebox)

	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-newDone:
		t.Fatalf("the new process stopped on its own contract migration: %v", err)
	default:
	}
	_, err = fleet.Join(ctx, fleet.Config{Pool: pool, ID: "old-again"})
	require.True(t, errors.As(err, &se), "the older binary refuses the contracted schema: %v", err)
	stopNew()
	require.NoError(t, <-newDone)
}

// TestAProcessThatRegistersDuringAContractMigrationRefusesIt: Migrate locks the registry
// while it decides on a contract migration and applies it (migrations'
// TestAContractMigrationLocksTheRegistry); a process of an older release that checked the
// schema before and registers meanwhile waits for the commit, then checks again and
// refuses, instead of running on the contracted schema until its next beat.
func TestAProcessThatRegistersDuringAContractMigrationRefusesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	// Migrate's lock before a contract migration, then the migration.
	_, err = tx.Exec(ctx, "LOCK TABLE oncebox_process IN SHARE MODE")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO oncebox_migration (version, name, contract) VALUES ($1, 'next', true)", migrations.Latest()+1)
	require.NoError(t, err)

	joined := make(chan error, 1)
	go func() {
		_, err := fleet.Join(ctx, fleet.Config{Pool: pool, ID: "late"})
		joined <- err
	}()
	time.Sleep(300 * time.Millisecond) // it checked the schema and waits to register
	select {
	case err := <-joined:
		t.Fatalf("Join did not wait for the registry lock: %v", err)
	default:
	}
	require.NoError(t, tx.Commit(ctx))
	var se *migrations.SchemaError
	err = <-joined
	require.True(t, errors.As(err, &se), "got %v", err)
	var stopped bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT stopped FROM oncebox_process WHERE id = 'late'").Scan(&stopped))
	require.True(t, stopped, "the refused process does not count as live")
}
