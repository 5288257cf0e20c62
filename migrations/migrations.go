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
	// schema and on the next release's.
	Contract bool
}

// ContractMarker, a line of a migration's SQL, makes it a contract migration: once it is
// applied, a process whose binary does not know it refuses to run (CheckSchema).
const ContractMarker = "-- oncebox:contract"

// All returns oncebox's own migrations in order.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration %q: want NNN_name.up.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %q: version: %w", name, err)
		}
		sql, err := fs.ReadFile(files, name)
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

// Migrate applies River's migrations (through rivermigrate) and then oncebox's, in one
// transaction under an advisory lock. Running it again is a no-op; concurrent runs wait
// for each other instead of failing.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (Result, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
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
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		res.Oncebox, err = migrateOncebox(ctx, tx, logger)
		return err
	})
	if err != nil {
		return Result{}, err
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

// migrateOncebox applies oncebox's migrations not yet applied, in tx, and records each
// in oncebox_migration. It returns the versions it applied.
func migrateOncebox(ctx context.Context, tx pgx.Tx, logger *slog.Logger) ([]int, error) {
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return nil, err
	}
	all, err := All()
	if err != nil {
		return nil, err
	}
	var versions []int
	for _, m := range all {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("apply migration %03d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO oncebox_migration (version, name, contract) VALUES ($1, $2, $3)", m.Version, m.Name, m.Contract); err != nil {
			return nil, fmt.Errorf("record migration %03d: %w", m.Version, err)
		}
		versions = append(versions, m.Version)
		logger.InfoContext(ctx, "applied migration", slog.Int("version", m.Version), slog.String("name", m.Name))
	}
	return versions, nil
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
	// lacks the column.
	if _, err := tx.Exec(ctx, "ALTER TABLE oncebox_migration ADD COLUMN IF NOT EXISTS contract boolean NOT NULL DEFAULT false"); err != nil {
		return nil, fmt.Errorf("add oncebox_migration.contract: %w", err)
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
}

// Error implements error.
func (e *SchemaError) Error() string {
	if e.Schema.Contract > e.Knows {
		return fmt.Sprintf("the database's schema has migration %03d, which binaries that do not know it cannot run on safely, and this oncebox knows migrations up to %03d: run a release that knows %03d or later (oncebox version)",
			e.Schema.Contract, e.Knows, e.Schema.Contract)
	}
	return fmt.Sprintf("the database's schema is at migration %03d and this oncebox needs %03d: run oncebox migrate first", e.Schema.Applied, e.Knows)
}

// CheckSchema returns a *SchemaError when this binary cannot run on the database's
// schema: a migration it knows is not applied yet (oncebox migrate first), or a contract
// migration it does not know is. A schema newer only by expand migrations is fine: that
// is a rolling upgrade, this binary beside the next release's.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) (Schema, error) {
	s, err := ReadSchema(ctx, pool)
	if err != nil {
		return s, err
	}
	if knows := Latest(); s.Applied < knows || s.Contract > knows {
		return s, &SchemaError{Schema: s, Knows: knows}
	}
	return s, nil
}
