package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed *.up.sql
var files embed.FS

// lockID is the advisory lock key held while migrating, so that concurrent runs queue up
// instead of failing. It spells "oncebox" in ASCII.
const lockID int64 = 0x6f6e6365626f78

// Migration is one numbered oncebox migration.
type Migration struct {
	Version int
	Name    string
	SQL     string
	// Contract marks a migration that binaries which do not know it cannot run on (it
	// drops, renames or narrows what they use). Its SQL holds the line ContractMarker.
	// Migrations are expand-only unless so marked: a release's binary runs on its own
	// schema and on the next release's. A binary also runs on a schema that lacks only
	// its own contract migrations, which Migrate holds while older processes are live.
	Contract bool
}

// ContractMarker, a line of a migration's SQL, makes it a contract migration: once it is
// applied, a process whose binary does not know it refuses to run (CheckSchema).
const ContractMarker = "-- oncebox:contract"

// All returns oncebox's own migrations in order.
func All() ([]Migration, error) { return Load(files) }

// Load reads the migrations in the top folder of fsys, files named NNN_name.up.sql, in
// order; a file with the line ContractMarker is a contract migration. All is Load of the
// embedded files; another list is for MigrateOpts.Migrations.
func Load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(rest, ".up.sql") {
			return nil, fmt.Errorf("migration %q: want NNN_name.up.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %q: version: %w", name, err)
		}
		sql, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		contract := slices.Contains(strings.Split(string(sql), "\n"), ContractMarker)
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(rest, ".up.sql"), SQL: string(sql), Contract: contract})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Result says what a Migrate call applied.
type Result struct {
	// River lists River's migration versions applied by this call.
	River []int
	// Oncebox lists oncebox's migration versions applied by this call.
	Oncebox []int
}

// MigrateOpts are Migrate's options; nil is the defaults.
type MigrateOpts struct {
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Migrations are oncebox's migrations to apply, in order. Defaults to All(), the
	// binary's own; a program that runs a contract migration this tree has not written
	// yet (the tests of the contract hold) passes its list.
	Migrations []Migration
}

// Migrate applies River's migrations (through rivermigrate) and then oncebox's, in one
// transaction under an advisory lock. Running it again is a no-op; concurrent runs wait
// for each other instead of failing.
//
// A contract migration is held while a live process runs a binary that does not know
// it (ContractHeldError): Migrate then applies the migrations before it, commits them,
// and returns the *ContractHeldError with the Result of what it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts *MigrateOpts) (Result, error) {
	if opts == nil {
		opts = &MigrateOpts{}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	list := opts.Migrations
	if list == nil {
		var err error
		if list, err = All(); err != nil {
			return Result{}, err
		}
	}
	// River's migrations each need a transaction of their own (some add enum values that
	// later statements use), so the lock is a session lock on a dedicated connection,
	// and every statement runs on that connection.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("acquire connection for migration lock: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockID); err != nil {
		return Result{}, fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockID)
	}()

	var res Result
	if res.River, err = migrateRiver(ctx, conn, pool, logger); err != nil {
		return Result{}, err
	}
	var held *ContractHeldError
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		res.Oncebox, held, err = migrateOncebox(ctx, tx, list, logger)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	if held != nil {
		return res, held
	}
	return res, nil
}

// migrateRiver applies River's migrations not yet applied, one per transaction, all
// on the locked connection conn (taking other connections from the pool while holding
// the lock could deadlock a small pool). It returns the versions it applied.
func migrateRiver(ctx context.Context, conn *pgxpool.Conn, pool *pgxpool.Pool, logger *slog.Logger) ([]int, error) {
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	var versions []int
	for {
		var step *rivermigrate.MigrateResult
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var err error
			// MigrateTx is deprecated for batching several migrations in one transaction;
			// MaxSteps: 1 applies exactly one per transaction, which is what Migrate does.
			step, err = migrator.MigrateTx(ctx, tx, rivermigrate.DirectionUp, &rivermigrate.MigrateOpts{MaxSteps: 1}) //nolint:staticcheck // see above

			return err
		})
		if err != nil {
			return nil, fmt.Errorf("apply river migrations: %w", err)
		}
		if len(step.Versions) == 0 {
			return versions, nil
		}
		for _, v := range step.Versions {
			versions = append(versions, v.Version)
		}
	}
}

// migrateOncebox applies the migrations of list not yet applied, in order, in tx, and
// records each in oncebox_migration. It returns the versions it applied; before a
// contract migration that live processes still need (heldBy), it stops and returns the
// *ContractHeldError as well, with no error, so that what it applied is committed.
func migrateOncebox(ctx context.Context, tx pgx.Tx, list []Migration, logger *slog.Logger) ([]int, *ContractHeldError, error) {
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	var versions []int
	for _, m := range list {
		if applied[m.Version] {
			continue
		}
		if m.Contract {
			held, err := heldBy(ctx, tx, m)
			if err != nil || held != nil {
				return versions, held, err
			}
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, nil, fmt.Errorf("apply migration %03d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO oncebox_migration (version, name, contract) VALUES ($1, $2, $3)", m.Version, m.Name, m.Contract); err != nil {
			return nil, nil, fmt.Errorf("record migration %03d: %w", m.Version, err)
		}
		versions = append(versions, m.Version)
		logger.InfoContext(ctx, "applied migration", slog.Int("version", m.Version), slog.String("name", m.Name),
			slog.Bool("contract", m.Contract))
	}
	return versions, nil, nil
}

// appliedVersions creates oncebox_migration if it is missing, and returns the versions
// of the oncebox migrations it records.
func appliedVersions(ctx context.Context, tx pgx.Tx) (map[int]bool, error) {
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS oncebox_migration (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("create oncebox_migration: %w", err)
	}
	// Which migrations older binaries cannot run on (CheckSchema); v0.1.0's table
	// lacks the column. Added only when missing: an ALTER TABLE, even one that changes
	// nothing, locks the table against reads until the migration commits, and every
	// process's schema check (each heartbeat, the readiness probe) reads it.
	var has bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = 'oncebox_migration'::regclass AND attname = 'contract' AND NOT attisdropped)`).Scan(&has); err != nil {
		return nil, fmt.Errorf("read oncebox_migration's columns: %w", err)
	}
	if !has {
		if _, err := tx.Exec(ctx, "ALTER TABLE oncebox_migration ADD COLUMN IF NOT EXISTS contract boolean NOT NULL DEFAULT false"); err != nil {
			return nil, fmt.Errorf("add oncebox_migration.contract: %w", err)
		}
	}
	rows, err := tx.Query(ctx, "SELECT version FROM oncebox_migration")
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	applied := map[int]bool{}
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}

// Latest returns the highest migration version this binary knows.
func Latest() int {
	all, err := All()
	if err != nil || len(all) == 0 {
		// The migrations are embedded and named at build time; TestAllParse fails first.
		panic(fmt.Sprintf("migrations: embedded migrations unreadable: %v", err))
	}
	return all[len(all)-1].Version
}

// LatestExpand returns the highest expand migration this binary knows: the one a schema
// must have for the binary to run on it (its own contract migrations after it may be
// missing, CheckSchemaOf).
func LatestExpand() int {
	all, err := All()
	if err != nil {
		panic(fmt.Sprintf("migrations: embedded migrations unreadable: %v", err))
	}
	v := 0
	for _, m := range all {
		if !m.Contract {
			v = m.Version
		}
	}
	return v
}

// Schema is what the database's oncebox_migration says about its schema.
type Schema struct {
	// Applied is the highest oncebox migration applied (0 for none).
	Applied int
	// Contract is the highest contract migration applied (0 for none): binaries that do
	// not know it must not run.
	Contract int
}

// ReadSchema reads the database's schema version. It works on tables written by v0.1.0,
// which have no contract column.
func ReadSchema(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (Schema, error) {
	var s Schema
	err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0),
		coalesce(max(version) FILTER (WHERE coalesce((to_jsonb(m) ->> 'contract')::boolean, false)), 0)
		FROM oncebox_migration m`).Scan(&s.Applied, &s.Contract)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: never migrated
			return Schema{}, nil
		}
		return Schema{}, fmt.Errorf("read schema version: %w", err)
	}
	return s, nil
}

// SchemaError is CheckSchema's refusal: the database's schema is one this binary cannot
// run on. Its message is one sentence that says what to do.
type SchemaError struct {
	Schema Schema
	// Knows is the highest migration this binary knows.
	Knows int
	// Needs is the highest expand migration this binary knows: the schema must have it.
	// The binary's own contract migrations after it may be missing.
	Needs int
}

// Error implements error.
func (e *SchemaError) Error() string {
	if e.Schema.Contract > e.Knows {
		return fmt.Sprintf("the database's schema has migration %03d, which binaries that do not know it cannot run on safely, and this oncebox knows migrations up to %03d: run a release that knows %03d or later (oncebox version)",
			e.Schema.Contract, e.Knows, e.Schema.Contract)
	}
	return fmt.Sprintf("the database's schema is at migration %03d and this oncebox needs %03d: run oncebox migrate first", e.Schema.Applied, e.Needs)
}

// CheckSchema returns a *SchemaError when this binary cannot run on the database's
// schema. It is CheckSchemaOf the binary's own migrations (All).
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) (Schema, error) {
	known, err := All()
	if err != nil {
		return Schema{}, err
	}
	return CheckSchemaOf(ctx, pool, known)
}

// CheckSchemaOf returns a *SchemaError when a binary that knows the migrations known
// cannot run on the database's schema: an expand migration it knows is not applied yet
// (oncebox migrate first), or a contract migration it does not know is. Two schemas are
// fine besides its own: one newer only by expand migrations (this binary beside the next
// release's), and one that lacks only this binary's contract migrations (a contract
// release's binaries roll out first, and `oncebox migrate` applies its contract
// migrations once no older process is live: Migrate). Migrate applies migrations in
// order, so a schema at Applied has every migration up to it.
func CheckSchemaOf(ctx context.Context, pool *pgxpool.Pool, known []Migration) (Schema, error) {
	s, err := ReadSchema(ctx, pool)
	if err != nil {
		return s, err
	}
	e := &SchemaError{Schema: s}
	for _, m := range known {
		e.Knows = m.Version
		if !m.Contract {
			e.Needs = m.Version
		}
	}
	if s.Applied < e.Needs || s.Contract > e.Knows {
		return s, e
	}
	return s, nil
}
