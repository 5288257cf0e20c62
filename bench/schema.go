package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/migrations"
)

// Schema is a fresh schema, migrated with River's and oncebox's migrations, and a pool
// whose search_path points at it.
type Schema struct {
	// Pool is bound to the schema.
	Pool *pgxpool.Pool
	name string
	url  string
}

// NewSchema creates a schema named bench_<random> in the database at url, migrates it
// and opens a pool of at most maxConns connections bound to it. Close drops it.
func NewSchema(ctx context.Context, url string, maxConns int32) (*Schema, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "bench_" + hex.EncodeToString(b[:])

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("bench: connect to Postgres: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+name)
	_ = conn.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: create schema: %w", err)
	}
	s := &Schema{name: name, url: url}

	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		_ = s.Close(ctx)
		return nil, fmt.Errorf("bench: parse database URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = name
	cfg.MaxConns = maxConns
	s.Pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		_ = s.Close(ctx)
		return nil, fmt.Errorf("bench: open pool: %w", err)
	}
	if _, err := migrations.Migrate(ctx, s.Pool, nil); err != nil {
		_ = s.Close(ctx)
		return nil, fmt.Errorf("bench: migrate schema %s: %w", name, err)
	}
	return s, nil
}

// Name returns the schema's name.
func (s *Schema) Name() string { return s.name }

// Close closes the pool and drops the schema with everything in it.
func (s *Schema) Close(ctx context.Context) error {
	if s.Pool != nil {
		s.Pool.Close()
	}
	ctx = context.WithoutCancel(ctx)
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return fmt.Errorf("bench: connect to drop schema %s: %w", s.name, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+s.name+" CASCADE"); err != nil {
		return fmt.Errorf("bench: drop schema %s: %w", s.name, err)
	}
	return nil
}
