package migrations

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ProcessLease is how long after its last beat a process registered in oncebox_process
// counts as live (internal/fleet beats every 3 s and reads the others with it too).
const ProcessLease = 15 * time.Second

// The release and highest migration of a live process that never registered: every
// release before the registry (migration 019) is v0.1.0, which knows up to 016. This
// serves v0.1.0, whose processes are seen only by the River jobs they run; it goes when
// upgrades from v0.1.0 are no longer supported.
const (
	unregisteredRelease   = "v0.1.0"
	unregisteredMigration = 16
)

// HoldingProcess is a live process whose binary does not know a contract migration, so
// that the migration waits for it to be gone.
type HoldingProcess struct {
	// ID is its River client id.
	ID string
	// Release is the release it runs (oncebox version); "v0.1.0" for a process that never
	// registered, seen by a River job it runs.
	Release string
	// Migration is the highest migration its binary knows.
	Migration int
	// Host and PID are where it runs; empty and 0 for an unregistered process (its
	// client id starts with the host name).
	Host string
	PID  int
	// SeenAt is its last beat, or when it started the job it was seen by.
	SeenAt time.Time
}

// ContractHeldError is Migrate's answer when a contract migration waits: live processes
// run a binary that does not know it, and would break on what it removes. Migrate applied
// and committed every migration before it. Run it again once the processes are replaced
// by a release that knows the migration; a process counts as gone when it stopped, or
// ProcessLease after its last beat.
type ContractHeldError struct {
	// Migration is the contract migration held; it and every migration after it wait.
	Migration Migration
	// Processes are the live processes that hold it, oldest release first.
	Processes []HoldingProcess
}

// Error implements error.
func (e *ContractHeldError) Error() string {
	names := make([]string, len(e.Processes))
	for i, p := range e.Processes {
		names[i] = p.String()
	}
	return fmt.Sprintf("contract migration %03d_%s is held: %d live process(es) run a release that does not know it (%s): replace them with a release that knows %03d (oncebox version), then run oncebox migrate again",
		e.Migration.Version, e.Migration.Name, len(e.Processes), strings.Join(names, "; "), e.Migration.Version)
}

// String names the process for an operator: release, host and pid, id.
func (p HoldingProcess) String() string {
	if p.Host == "" {
		return fmt.Sprintf("%s, unregistered, running a job as %s", p.Release, p.ID)
	}
	return fmt.Sprintf("%s (knows up to %03d) on %s pid %d, id %s", p.Release, p.Migration, p.Host, p.PID, p.ID)
}

// sqlHolding lists the live processes whose binaries know no migration as high as $1:
// registered ones that beat within the lease ($2 seconds) and did not stop, and, as
// release $3 knowing $4, unregistered ones seen running a job (a running River job whose
// last attempt names no registered process), as internal/fleet sees them. now() is the
// migration transaction's start, on purpose: processes read oncebox_migration at every
// beat, and those reads wait while Migrate holds it, so a process that beat before the
// transaction began counts as live however long the migrations before this one took.
const sqlHolding = `SELECT id, version, migration, host, pid, seen_at FROM oncebox_process
	WHERE NOT stopped AND seen_at > now() - make_interval(secs => $2) AND migration < $1::int
	UNION ALL
	SELECT r.by, $3::text, $4::int, ''::text, 0::int, max(r.attempted_at) FROM
		(SELECT j.attempted_by[array_upper(j.attempted_by, 1)] AS by, j.attempted_at FROM river_job j
			WHERE j.state = 'running' AND j.attempted_by IS NOT NULL) r
	WHERE $4::int < $1::int AND NOT EXISTS (SELECT 1 FROM oncebox_process p WHERE p.id = r.by)
	GROUP BY r.by
	ORDER BY 3, 1`

// heldBy returns a *ContractHeldError when a live process does not know the contract
// migration m, nil when m may be applied in tx. It first locks oncebox_process against
// writes until tx ends: a process that registers meanwhile waits, and then reads the
// schema with m applied (fleet checks the schema again after it registers), so that no
// process too old for m starts between this look and m's commit. Beats wait too.
func heldBy(ctx context.Context, tx pgx.Tx, m Migration) (*ContractHeldError, error) {
	if _, err := tx.Exec(ctx, "LOCK TABLE oncebox_process IN SHARE MODE"); err != nil {
		return nil, fmt.Errorf("lock oncebox_process before contract migration %03d: %w", m.Version, err)
	}
	rows, err := tx.Query(ctx, sqlHolding, m.Version, ProcessLease.Seconds(), unregisteredRelease, unregisteredMigration)
	if err != nil {
		return nil, fmt.Errorf("live processes before contract migration %03d: %w", m.Version, err)
	}
	procs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HoldingProcess, error) {
		var p HoldingProcess
		err := r.Scan(&p.ID, &p.Release, &p.Migration, &p.Host, &p.PID, &p.SeenAt)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("live processes before contract migration %03d: %w", m.Version, err)
	}
	if len(procs) == 0 {
		return nil, nil
	}
	return &ContractHeldError{Migration: m, Processes: procs}, nil
}
