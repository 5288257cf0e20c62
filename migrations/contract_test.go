package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/migrations"
)

// nextRelease returns the binary's migrations followed by a release that adds a column
// (expand), drops it (contract, last) and, in the release after, adds a table (expand):
// the shape of a release like v0.3.0 (038) and its successor, written here so that the
// test does not depend on what the tree's next release holds.
// latestContract is the highest contract migration of the binary's own.
func latestContract(t *testing.T) int {
	t.Helper()
	all, err := migrations.All()
	require.NoError(t, err)
	c := 0
	for _, m := range all {
		if m.Contract {
			c = m.Version
		}
	}
	return c
}

func nextRelease(t *testing.T) (list []migrations.Migration, expand, contract, after int) {
	t.Helper()
	all, err := migrations.All()
	require.NoError(t, err)
	l := migrations.Latest()
	next, err := migrations.Load(fstest.MapFS{
		fmt.Sprintf("%03d_old_column.up.sql", l+1): {Data: []byte("ALTER TABLE oncebox_op ADD COLUMN contract_test_old text;\n")},
		fmt.Sprintf("%03d_drop_old_column.up.sql", l+2): {Data: []byte(migrations.ContractMarker +
			"\n-- nothing reads contract_test_old since the previous release\nALTER TABLE oncebox_op DROP COLUMN contract_test_old;\n")},
		fmt.Sprintf("%03d_after.up.sql", l+3): {Data: []byte("CREATE TABLE contract_test_after (id int);\n")},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true, false}, []bool{next[0].Contract, next[1].Contract, next[2].Contract}, "the marker line makes a contract migration")
	return append(all, next...), l + 1, l + 2, l + 3
}

// register registers a process as a release's binary does, beating for the next hour
// (Migrate may wait longer than a lease for the advisory lock other tests hold); extra
// sets more of its row.
func register(t *testing.T, pool *pgxpool.Pool, id, release string, knows int, extra string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO oncebox_process (id, version, commit, migration, protocol, host, pid, seen_at)
		VALUES ($1, $2, 'abc', $3, 2, 'host-'||$1, 7, now() + interval '1 hour')`, id, release, knows)
	require.NoError(t, err)
	if extra != "" {
		_, err = pool.Exec(context.Background(), "UPDATE oncebox_process SET "+extra+" WHERE id = $1", id)
		require.NoError(t, err)
	}
}

func columnExists(t *testing.T, pool *pgxpool.Pool) bool {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'oncebox_op' AND column_name = 'contract_test_old'`).Scan(&n))
	return n == 1
}

// TestAContractMigrationWaitsForOlderProcesses: Migrate applies the expand migrations
// and holds a contract migration, and every migration after it, while a live process
// runs a binary that does not know it: registered (beat within the lease, not stopped)
// or unregistered v0.1.0 seen running a job. Stopped, stale and newer processes do not
// hold it; once the older ones are gone, it is applied.
func TestAContractMigrationWaitsForOlderProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptySchema(t)
	_, err := migrations.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	list, expand, contract, after := nextRelease(t)
	l := migrations.Latest()

	register(t, pool, "old", "v0.2.0", l, "")
	register(t, pool, "new", "v0.3.0", after, "")
	register(t, pool, "stopped", "v0.2.0", l, "stopped = true")
	register(t, pool, "stale", "v0.2.0", l, "seen_at = now() - interval '1 minute'")

	res, err := migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Migrations: list})
	var held *migrations.ContractHeldError
	require.True(t, errors.As(err, &held), "got %v", err)
	require.Equal(t, []int{expand}, res.Oncebox, "the expand migration before it is applied")
	require.Equal(t, contract, held.Migration.Version)
	require.Len(t, held.Processes, 1)
	require.Equal(t, "old", held.Processes[0].ID)
	require.Equal(t, "v0.2.0", held.Processes[0].Release)
	require.Equal(t, "host-old", held.Processes[0].Host)
	require.Equal(t, l, held.Processes[0].Migration)
	require.Equal(t, fmt.Sprintf("contract migration %03d_drop_old_column is held: 1 live process(es) run a release that does not know it (v0.2.0 (knows up to %03d) on host-old pid 7, id old): replace them with a release that knows %03d (oncebox version), then run oncebox migrate again",
		contract, l, contract), err.Error())
	s, err := migrations.ReadSchema(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, migrations.Schema{Applied: expand, Contract: latestContract(t)}, s, "the expand migration is committed, the contract one and the one after it are not")
	require.True(t, columnExists(t, pool))

	// The old process stops; a v0.1.0 process, which never registers, runs a job.
	_, err = pool.Exec(ctx, "UPDATE oncebox_process SET stopped = true WHERE id = 'old'")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, attempt, attempted_at, attempted_by)
		VALUES ('{}', 'dispatch', 5, 'oncebox_webhook', 'running', 1, now(), '{v010_client}')`)
	require.NoError(t, err)
	res, err = migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Migrations: list})
	require.True(t, errors.As(err, &held), "got %v", err)
	require.Empty(t, res.Oncebox)
	require.Len(t, held.Processes, 1)
	require.Equal(t, migrations.HoldingProcess{ID: "v010_client", Release: "v0.1.0", Migration: 16, SeenAt: held.Processes[0].SeenAt}, held.Processes[0])
	require.Contains(t, err.Error(), "(v0.1.0, unregistered, running a job as v010_client)")

	// Its job ends: nothing older is live, the contract migration and the one after it run.
	_, err = pool.Exec(ctx, "UPDATE river_job SET state = 'completed', finalized_at = now()")
	require.NoError(t, err)
	res, err = migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Migrations: list})
	require.NoError(t, err)
	require.Equal(t, []int{contract, after}, res.Oncebox)
	s, err = migrations.ReadSchema(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, migrations.Schema{Applied: after, Contract: contract}, s)
	require.False(t, columnExists(t, pool))
}

// TestABinaryRunsWithoutItsOwnContractMigrations: a binary whose release ends with a
// contract migration runs on a schema that lacks it (its binaries roll out before the
// contract migration runs), but not on one that lacks an expand migration it knows, nor
// once a contract migration it does not know is applied.
func TestABinaryRunsWithoutItsOwnContractMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptySchema(t)
	_, err := migrations.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	list, expand, contract, _ := nextRelease(t)
	release := list[:len(list)-1] // the release that ends with the contract migration

	var se *migrations.SchemaError
	_, err = migrations.CheckSchemaOf(ctx, pool, release)
	require.True(t, errors.As(err, &se), "its expand migration is missing: %v", err)
	require.Equal(t, fmt.Sprintf("the database's schema is at migration %03d and this oncebox needs %03d: run oncebox migrate first", expand-1, expand), err.Error())

	register(t, pool, "old", "v0.2.0", migrations.Latest(), "")
	_, err = migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Migrations: release})
	var held *migrations.ContractHeldError
	require.True(t, errors.As(err, &held), "got %v", err)
	s, err := migrations.CheckSchemaOf(ctx, pool, release)
	require.NoError(t, err, "only its own contract migration is missing")
	require.Equal(t, migrations.Schema{Applied: expand, Contract: latestContract(t)}, s)
	_, err = migrations.CheckSchema(ctx, pool)
	require.NoError(t, err, "and the older binary runs beside it")

	// The release after it adds an expand migration: its binary needs it.
	_, err = migrations.CheckSchemaOf(ctx, pool, list)
	require.True(t, errors.As(err, &se), "got %v", err)

	_, err = pool.Exec(ctx, "UPDATE oncebox_process SET stopped = true")
	require.NoError(t, err)
	_, err = migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Migrations: release})
	require.NoError(t, err)
	_, err = migrations.CheckSchemaOf(ctx, pool, release)
	require.NoError(t, err)
	_, err = migrations.CheckSchema(ctx, pool)
	require.True(t, errors.As(err, &se), "the older binary refuses the contract migration: %v", err)
	require.Equal(t, contract, se.Schema.Contract)
}

// TestAContractMigrationLocksTheRegistry: from the look at the live processes to the
// commit of the contract migration, a process cannot register (nor beat): it waits, and
// then reads the schema with the migration applied (internal/fleet's
// TestAProcessThatRegistersDuringAContractMigrationRefusesIt).
func TestAContractMigrationLocksTheRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptySchema(t)
	_, err := migrations.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	all, err := migrations.All()
	require.NoError(t, err)
	const slow = "SELECT pg_sleep(3) AS contract_lock_test"
	next, err := migrations.Load(fstest.MapFS{
		fmt.Sprintf("%03d_slow_contract.up.sql", migrations.Latest()+1): {Data: []byte(migrations.ContractMarker + "\n" + slow)},
	})
	require.NoError(t, err)
	migrated := make(chan error, 1)
	go func() {
		_, err := migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Migrations: append(slices.Clip(all), next...)})
		migrated <- err
	}()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1", slow).Scan(&n))
		return n == 1
	}, time.Minute, 10*time.Millisecond, "the contract migration runs (after other tests' migrations, which share the advisory lock)")

	registered := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, `INSERT INTO oncebox_process (id, version, commit, migration, protocol, host, pid)
			VALUES ('late', 'v0.2.0', 'abc', $1, 2, 'host-late', 7)`, migrations.Latest())
		registered <- err
	}()
	// The registration must be seen waiting for a lock while the migration runs: once
	// the migration commits, the two finish in either order.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%host-late%' AND query NOT LIKE '%pg_stat_activity%'`).Scan(&n))
		return n == 1
	}, 10*time.Second, 10*time.Millisecond, "a process registered while the contract migration ran, or never")
	require.NoError(t, <-migrated)
	require.NoError(t, <-registered)
}

// TestAMigrationLeavesTheRegistryReadable: a migration holds no lock that stops a read
// of oncebox_migration, which every process's schema check (each heartbeat, the
// readiness probe) makes while an operator migrates. The test's migration asks, inside
// the migration's own transaction, whether that transaction holds such a lock.
func TestAMigrationLeavesTheRegistryReadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptySchema(t)
	all, err := migrations.All()
	require.NoError(t, err)
	next, err := migrations.Load(fstest.MapFS{
		fmt.Sprintf("%03d_check_lock.up.sql", migrations.Latest()+1): {Data: []byte(`DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() AND relation = 'oncebox_migration'::regclass
            AND mode = 'AccessExclusiveLock') THEN
        RAISE EXCEPTION 'the migration locks oncebox_migration against reads';
    END IF;
END $$;
`)},
	})
	require.NoError(t, err)
	_, err = migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Migrations: all})
	require.NoError(t, err)
	_, err = migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Migrations: append(slices.Clip(all), next...)})
	require.NoError(t, err)
}
