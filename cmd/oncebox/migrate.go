package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/migrations"
)

// exitHeld is migrate's exit status when a contract migration is held by live processes
// of an older release (migrations.ContractHeldError): the migrations before it are
// applied, and running migrate again once those processes are gone applies the rest.
const exitHeld = 3

// migrateWaitPoll is how often `oncebox migrate --wait` looks again at the live
// processes: as often as they beat.
const migrateWaitPoll = 3 * time.Second

// runMigrate is `oncebox migrate`: oncebox's and River's migrations, safe to run twice or
// at once.
func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	g := addGlobalFlags(fs)
	wait := fs.Bool("wait", false, "when a contract migration is held by live processes of an older release, wait until they are gone and apply it (default: apply what comes before it and exit with status 3)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: errors.New("usage: oncebox migrate [--wait] (no arguments)")}
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
	return migrate(ctx, pool, nil, *wait, os.Stdout)
}

// migrate applies the migrations of list (nil: the binary's own) and reports on out. A
// contract migration held by live processes ends it with exit status exitHeld and the
// sentence that names them, or, with wait, is tried again every migrateWaitPoll until
// they are gone (each change of who holds it reported).
func migrate(ctx context.Context, pool *pgxpool.Pool, list []migrations.Migration, wait bool, out io.Writer) error {
	var river, oncebox int
	var last string
	for {
		res, err := migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Migrations: list})
		river += len(res.River)
		oncebox += len(res.Oncebox)
		var held *migrations.ContractHeldError
		if !errors.As(err, &held) {
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "migrated: %d River migration(s), %d oncebox migration(s) applied\n", river, oncebox)
			return nil
		}
		if !wait {
			fmt.Fprintf(out, "migrated: %d River migration(s), %d oncebox migration(s) applied; contract migration %03d held\n",
				river, oncebox, held.Migration.Version)
			return &exitError{code: exitHeld, err: err}
		}
		if msg := held.Error(); msg != last {
			fmt.Fprintf(out, "waiting: %s\n", msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			return &exitError{code: exitHeld, err: fmt.Errorf("stopped waiting: %w", err)}
		case <-time.After(migrateWaitPoll):
		}
	}
}
