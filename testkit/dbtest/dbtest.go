// Package dbtest gives tests a real, migrated Postgres schema of their own.
//
// The database comes from TEST_DATABASE_URL, else DATABASE_URL, else a private cluster or
// a testcontainers Postgres found by package localpg. Each call to Schema creates a fresh
// schema, applies River's and oncebox's migrations into it, and returns a pool whose
// search_path points at it, so tests and packages run in parallel without seeing each
// other's rows. The schema is dropped when the test ends.
package dbtest

import (
	"context"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/devkit/localpg"
	"github.com/oncebox/oncebox/devkit/pgcontainer"
	"github.com/oncebox/oncebox/devkit/scratch"
)

var (
	urlOnce sync.Once
	baseURL string
	urlErr  error
)

// URL returns the base database URL tests run against, starting a private Postgres the
// first time when no URL is configured. It fails the test with one sentence when no
// Postgres can be had.
func URL(tb testing.TB) string {
	tb.Helper()
	urlOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pg, err := localpg.Start(ctx, localpg.Config{EnvVars: []string{"TEST_DATABASE_URL", "DATABASE_URL"}, Container: pgcontainer.Start})
		if err != nil {
			urlErr = err
			return
		}
		// A private cluster started here lives as long as the test binary: TestMain stops
		// it through Main (or Stop). Its data folder is kept and reused by later runs.
		started = pg
		baseURL = pg.URL
	})
	if urlErr != nil {
		tb.Fatalf("tests need PostgreSQL: %v", urlErr)
	}
	return baseURL
}

var started *localpg.Postgres

// Stop stops a Postgres that URL started for this test binary, if any. Call it from
// TestMain after m.Run.
func Stop() {
	if started != nil {
		_ = started.Close(context.Background())
	}
}

// Main is a TestMain body: it runs the tests and then stops any Postgres they started.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Schema creates a fresh migrated schema and returns a pool bound to it.
func Schema(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return SchemaWithConfig(tb, nil)
}

// SchemaWithConfig is Schema with a hook to adjust the pool configuration.
func SchemaWithConfig(tb testing.TB, adjust func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	sc, err := scratch.New(context.Background(), URL(tb), "t_", func(cfg *pgxpool.Config) {
		cfg.MaxConns = 20
		if adjust != nil {
			adjust(cfg)
		}
	})
	if err != nil {
		tb.Fatalf("test schema: %v", err)
	}
	tb.Cleanup(func() { _ = sc.Close(context.Background()) })
	return sc.Pool
}

// Count returns the number that sql, a query of one row and one column such as
// SELECT count(*), answers.
func Count(tb testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	tb.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		tb.Fatalf("count: %v", err)
	}
	return n
}

// ConnString returns a connection string for the schema a pool from Schema is bound to,
// for a child process that must reach the same rows.
func ConnString(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	schema := pool.Config().ConnConfig.RuntimeParams["search_path"]
	u, err := url.Parse(URL(tb))
	if err != nil {
		tb.Fatalf("parse database URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// ForExample returns a pool bound to a fresh migrated schema, and a function that drops
// it, for runnable examples (which have no testing.TB). It panics when no Postgres can
// be had.
func ForExample() (*pgxpool.Pool, func()) {
	ctx := context.Background()
	pg, err := localpg.Start(ctx, localpg.Config{EnvVars: []string{"TEST_DATABASE_URL", "DATABASE_URL"}, Container: pgcontainer.Start})
	if err != nil {
		panic(err)
	}
	sc, err := scratch.New(ctx, pg.URL, "x_", nil)
	if err != nil {
		panic(err)
	}
	return sc.Pool, func() {
		_ = sc.Close(context.Background())
		_ = pg.Close(context.Background())
	}
}
