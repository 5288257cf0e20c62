// Package fleet tells a serve process which releases share its database. Every process
// of a release from v0.2.0 on registers in oncebox_process with the dispatch protocol it
// speaks and beats every few seconds; v0.1.0 processes, which do not register, are seen
// by the River jobs they run. What a mixed-version window needs is switched on from what
// the database says, never by hand: while a process that speaks an older protocol than
// this one is live, Member.Mixed reports true (serve commits a claim before every vendor
// call then, the path every release understands), and false again once the last one is
// gone. The schema check at start (migrations.CheckSchema) is repeated at every beat: a
// contract migration applied while the process runs stops it.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/internal/release"
	"github.com/oncebox/oncebox/migrations"
)

// The dispatch protocols. A process uses clean runs (no claim commit before a vendor
// call) only while every live process speaks Protocol or a later one.
const (
	// ProtocolCleanRuns is v0.1.0's: clean runs (migration 016), no registration.
	ProtocolCleanRuns = 1
	// ProtocolRegistered is v0.2.0's: it registers in oncebox_process.
	ProtocolRegistered = 2
	// Protocol is the protocol this binary speaks.
	Protocol = ProtocolRegistered
	// unregisteredProtocol is what a live process that never registered speaks: every
	// release before the registry is v0.1.0.
	unregisteredProtocol = ProtocolCleanRuns
)

// Defaults of Config.
const (
	// DefaultBeat is how often a process beats and looks at the others.
	DefaultBeat = 3 * time.Second
	// DefaultLease is how long a process counts as live after its last beat: the lease
	// `oncebox migrate` reads too before a contract migration.
	DefaultLease = migrations.ProcessLease
	// DefaultJoinWait is how long Join retries a database that does not answer.
	DefaultJoinWait = time.Minute
)

// Config configures a Member.
type Config struct {
	// Pool is the database. Required.
	Pool *pgxpool.Pool
	// ID names the process; it must be its River client id (dispatch.NewClientID), so
	// that the jobs it runs name it.
	ID string
	// Protocol overrides the protocol this process registers with (tests; 0: Protocol).
	Protocol int
	// Migrations are the migrations the binary knows: the schema is checked against
	// them, and the highest is registered. Defaults to migrations.All().
	Migrations []migrations.Migration
	// Beat and Lease default to DefaultBeat and DefaultLease.
	Beat, Lease time.Duration
	// JoinWait is how long Join goes on trying while the database fails (a restart, a
	// failover: a process started then would otherwise exit); a schema it cannot run
	// on is refused at once. Defaults to DefaultJoinWait.
	JoinWait time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Member is one registered process.
type Member struct {
	cfg   Config
	mixed atomic.Bool
	// mixedUntil keeps the window open for a lease after the last older process was
	// seen, so that one beat that misses it (between two jobs) does not close it.
	mixedUntil time.Time
	// looked is set after the first look, which logs the state either way.
	looked bool
}

// Join checks the schema, registers the process and reads who else is live, so that
// Mixed is right before the first job runs. It returns a *migrations.SchemaError when
// the binary cannot run on the schema.
func Join(ctx context.Context, cfg Config) (*Member, error) {
	if cfg.Pool == nil || cfg.ID == "" {
		return nil, errors.New("fleet: Pool and ID are required")
	}
	if cfg.Protocol == 0 {
		cfg.Protocol = Protocol
	}
	if cfg.Beat <= 0 {
		cfg.Beat = DefaultBeat
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.JoinWait <= 0 {
		cfg.JoinWait = DefaultJoinWait
	}
	if len(cfg.Migrations) == 0 {
		all, err := migrations.All()
		if err != nil {
			return nil, err
		}
		cfg.Migrations = all
	}
	deadline := time.Now().Add(cfg.JoinWait)
	for {
		m, err := join(ctx, cfg)
		var se *migrations.SchemaError
		if err == nil || errors.As(err, &se) || ctx.Err() != nil || time.Now().After(deadline) {
			return m, err
		}
		cfg.Logger.Warn("fleet: could not join yet; retrying until the database answers", slog.String("error", err.Error()),
			slog.Time("until", deadline))
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// join is one try of Join. The schema is checked before registering (a schema too old
// for the registry is refused at once) and again after: `oncebox migrate` locks the
// registry while it decides on a contract migration, so a process that registered too
// late to hold it sees it applied.
func join(ctx context.Context, cfg Config) (*Member, error) {
	if _, err := migrations.CheckSchemaOf(ctx, cfg.Pool, cfg.Migrations); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	knows := cfg.Migrations[len(cfg.Migrations)-1].Version
	if _, err := cfg.Pool.Exec(ctx, sqlRegister, cfg.ID, release.Version(), release.Commit(), knows,
		cfg.Protocol, host, os.Getpid()); err != nil {
		return nil, fmt.Errorf("fleet: register: %w", err)
	}
	if _, err := migrations.CheckSchemaOf(ctx, cfg.Pool, cfg.Migrations); err != nil {
		_, _ = cfg.Pool.Exec(context.WithoutCancel(ctx), sqlStop, cfg.ID)
		return nil, err
	}
	m := &Member{cfg: cfg}
	// Until the first look says otherwise, assume an older process may be live.
	m.mixed.Store(true)
	if err := m.look(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Mixed reports whether a process that speaks an older protocol than this one may be
// live: serve commits a claim before every vendor call while it does.
func (m *Member) Mixed() bool { return m.mixed.Load() }

// ID is the process's id.
func (m *Member) ID() string { return m.cfg.ID }

// Run beats until ctx ends, then marks the process stopped. It returns a
// *migrations.SchemaError when a contract migration this binary does not know was
// applied meanwhile: the process must stop.
func (m *Member) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Beat)
	defer t.Stop()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = m.cfg.Pool.Exec(sctx, sqlStop, m.cfg.ID)
	}()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := migrations.CheckSchemaOf(ctx, m.cfg.Pool, m.cfg.Migrations); err != nil {
			var se *migrations.SchemaError
			if errors.As(err, &se) {
				return err
			}
			m.cfg.Logger.Warn("fleet: could not read the schema version", slog.String("error", err.Error()))
		}
		if _, err := m.cfg.Pool.Exec(ctx, sqlBeat, m.cfg.ID); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("fleet: beat failed", slog.String("error", err.Error()))
		}
		if err := m.look(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("fleet: could not read the live processes", slog.String("error", err.Error()))
		}
		if i%1000 == 999 {
			_, _ = m.cfg.Pool.Exec(ctx, sqlForget)
		}
	}
}

// look reads the oldest live protocol and sets Mixed. A failed read leaves Mixed on.
func (m *Member) look(ctx context.Context) error {
	var oldest *int
	if err := m.cfg.Pool.QueryRow(ctx, sqlOldest, m.cfg.Lease.Seconds(), unregisteredProtocol).Scan(&oldest); err != nil {
		m.mixed.Store(true)
		return fmt.Errorf("fleet: oldest live protocol: %w", err)
	}
	now := time.Now()
	if oldest != nil && *oldest < m.cfg.Protocol {
		m.mixedUntil = now.Add(m.cfg.Lease)
	}
	mixed := now.Before(m.mixedUntil)
	first := !m.looked
	m.looked = true
	if was := m.mixed.Swap(mixed); was != mixed || first {
		if mixed {
			m.cfg.Logger.Info("fleet: a process of an older release is live: claims are committed before every vendor call until it is gone",
				slog.Int("oldest_protocol", *oldest), slog.Int("protocol", m.cfg.Protocol))
		} else {
			m.cfg.Logger.Info("fleet: every live process speaks this protocol: clean runs", slog.Int("protocol", m.cfg.Protocol))
		}
	}
	return nil
}

// Process is one registered process as Live lists it.
type Process struct {
	ID, Version, Commit, Host string
	Migration, Protocol, PID  int
	StartedAt, SeenAt         time.Time
}

// Live lists the registered processes that beat within lease.
func Live(ctx context.Context, pool *pgxpool.Pool, lease time.Duration) ([]Process, error) {
	rows, err := pool.Query(ctx, sqlLive, lease.Seconds())
	if err != nil {
		return nil, fmt.Errorf("fleet: live processes: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Process, error) {
		var p Process
		err := r.Scan(&p.ID, &p.Version, &p.Commit, &p.Migration, &p.Protocol, &p.Host, &p.PID, &p.StartedAt, &p.SeenAt)
		return p, err
	})
}

// CheckSchema says whether this binary can run on the database's schema, for a readiness
// probe: mismatch is CheckSchema's sentence when it cannot (oncebox migrate first, or a
// contract migration this binary does not know), err is set when the schema could not be
// read (Postgres did not answer).
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) (mismatch string, err error) {
	_, err = migrations.CheckSchema(ctx, pool)
	var se *migrations.SchemaError
	if errors.As(err, &se) {
		return se.Error(), nil
	}
	return "", err
}
