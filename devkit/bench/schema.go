package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/devkit/scratch"
)

// Schema is a fresh schema, migrated with River's and oncebox's migrations, and a pool
// whose search_path points at it.
type Schema struct {
	// Pool is bound to the schema.
	Pool    *pgxpool.Pool
	scratch *scratch.Schema
}

// NewSchema creates a schema named bench_<random> in the database at url, migrates it
// and opens a pool of at most maxConns connections bound to it. Close drops it.
func NewSchema(ctx context.Context, url string, maxConns int32) (*Schema, error) {
	sc, err := scratch.New(ctx, url, "bench_", func(cfg *pgxpool.Config) { cfg.MaxConns = maxConns })
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return &Schema{Pool: sc.Pool, scratch: sc}, nil
}

// Name returns the schema's name.
func (s *Schema) Name() string { return s.scratch.Name }

// Close closes the pool and drops the schema with everything in it.
func (s *Schema) Close(ctx context.Context) error {
	if err := s.scratch.Close(ctx); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}
