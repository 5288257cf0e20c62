// Package scratch gives tests, examples and benchmarks a fresh Postgres schema each,
// migrated with River's and oncebox's migrations, so they run side by side in one
// database without seeing each other's rows. It is not part of oncebox's API.
package scratch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/migrations"
)

// Schema is a fresh schema migrated with River's and oncebox's migrations, with a pool
// whose search_path points at it. Tests, examples and benchmarks use one each, so they
// run side by side in one database without seeing each other's rows.
type Schema struct {
	// Pool is bound to the schema.
	Pool *pgxpool.Pool
	// Name is the schema's name.
	Name string
	url  string
}

// New creates a schema named prefix + random hex in the database at url, opens a
// pool bound to it (adjust, when set, may change the pool's configuration first) and
// migrates it. Close drops it.
func New(ctx context.Context, url, prefix string, adjust func(*pgxpool.Config)) (*Schema, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	s := &Schema{Name: prefix + hex.EncodeToString(b[:]), url: url}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+s.Name)
	_ = conn.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("create schema %s: %w", s.Name, err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		_ = s.Close(ctx)
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = s.Name
	if adjust != nil {
		adjust(cfg)
	}
	if s.Pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		_ = s.Close(ctx)
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if _, err := migrations.Migrate(ctx, s.Pool, nil); err != nil {
		_ = s.Close(ctx)
		return nil, fmt.Errorf("migrate schema %s: %w", s.Name, err)
	}
	return s, nil
}

// Close closes the pool and drops the schema with everything in it.
func (s *Schema) Close(ctx context.Context) error {
	if s.Pool != nil {
		s.Pool.Close()
	}
	ctx = context.WithoutCancel(ctx)
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return fmt.Errorf("connect to drop schema %s: %w", s.Name, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+s.Name+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", s.Name, err)
	}
	return nil
}
