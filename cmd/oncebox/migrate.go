package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/oncebox/oncebox/migrations"
)

// runMigrate is `oncebox migrate`: oncebox's and River's migrations, safe to run twice or
// at once.
func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	g := addGlobalFlags(fs)
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: errors.New("usage: oncebox migrate (no arguments)")}
	}
	// The log flags are checked like everywhere; migrate reports on standard output.
	if _, err := g.log.logger(); err != nil {
		return err
	}
	pool, err := g.openPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	res, err := migrations.Migrate(ctx, pool, nil)
	if err != nil {
		return err
	}
	fmt.Printf("migrated: %d River migration(s), %d oncebox migration(s) applied\n", len(res.River), len(res.Oncebox))
	return nil
}
