package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/cells"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
)

const cellUsage = "usage: oncebox cell add NAME --cell-url URL | cell list  (--format text|json)"

// runCell is `oncebox cell`: the cells of the installation whose home cell is
// --database-url (docs/scaling.md).
func runCell(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cell", flag.ContinueOnError)
	g := addGlobalFlags(fs)
	cellURL := secretVar(fs, "cell-url", "", "", "with cell add: the Postgres URL of the new cell's database (migrated by the command)")
	format := fs.String("format", "text", "text or json")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if _, err := g.log.logger(); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return &exitError{code: 2, err: fmt.Errorf("--format %q: want text or json", *format)}
	}
	rest := fs.Args()
	home, err := openMigratedPool(ctx, g.databaseURL())
	if err != nil {
		return err
	}
	defer home.Close()
	switch {
	case len(rest) == 2 && rest[0] == "add":
		if *cellURL == "" {
			return &exitError{code: 2, err: errors.New("cell add needs --cell-url, the new cell's Postgres URL")}
		}
		if err := cells.CheckName(rest[1]); err != nil {
			return &exitError{code: 2, err: err}
		}
		pool, err := openPool(ctx, *cellURL)
		if err != nil {
			return fmt.Errorf("cell %s: %w", rest[1], err)
		}
		defer pool.Close()
		if err := migrate(ctx, pool, nil, false, io.Discard); err != nil {
			return fmt.Errorf("cell %s: migrate: %w", rest[1], err)
		}
		c, err := cells.AddCell(ctx, home, pool, rest[1])
		if err != nil {
			return err
		}
		if *format == "json" {
			return json.NewEncoder(os.Stdout).Encode(c)
		}
		fmt.Printf("cell %s is number %d; serve it with --cells %s=URL\n", c.Name, c.Number, c.Name)
		return nil
	case len(rest) == 1 && rest[0] == "list":
		list, err := cells.List(ctx, home)
		if err != nil {
			return err
		}
		if *format == "json" {
			return json.NewEncoder(os.Stdout).Encode(list)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CELL\tNUMBER")
		for _, c := range list {
			fmt.Fprintf(tw, "%s\t%d\n", c.Name, c.Number)
		}
		return tw.Flush()
	}
	return &exitError{code: 2, err: errors.New(cellUsage)}
}

const tenantMoveUsage = "usage: oncebox tenant move NAME --to CELL [--dry-run] [--wait 1m] [--cells name=URL,...]"

// runTenantMove is `oncebox tenant move`: a tenant from its cell to another, or with
// --dry-run what that would do.
func runTenantMove(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tenant move", flag.ContinueOnError)
	g := addGlobalFlags(fs)
	cellsFlag := secretVar(fs, "cells", "ONCEBOX_CELLS", "", "the cells other than the home cell, as serve's --cells: name=postgres-URL pairs separated by commas")
	to := fs.String("to", "", "the cell to move the tenant to (home: DATABASE_URL's)")
	dryRun := fs.Bool("dry-run", false, "say what the move would do (rows per table, work in flight, transaction ids to catch up) and change nothing")
	wait := fs.Duration("wait", cells.DefaultMoveWait, "how long to wait for the tenant's ops in flight to settle in its old cell before giving up (nothing moved)")
	drain := fs.Duration("drain", cells.DefaultDrain, "how long to wait, once the directory says moving, for every serve to read it (keep above serve's --cell-directory-refresh)")
	format := fs.String("format", "text", "text or json")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	logger, err := g.log.logger()
	if err != nil {
		return err
	}
	if len(fs.Args()) != 1 || *to == "" {
		return &exitError{code: 2, err: errors.New(tenantMoveUsage)}
	}
	if *format != "text" && *format != "json" {
		return &exitError{code: 2, err: fmt.Errorf("--format %q: want text or json", *format)}
	}
	name := fs.Args()[0]
	pools, closeAll, err := openCells(ctx, g.databaseURL(), *cellsFlag)
	if err != nil {
		return err
	}
	defer closeAll()
	m := &cells.Mover{Home: pools[cells.Home], Cells: pools, Wait: *wait, Drain: *drain,
		Logf: func(f string, a ...any) { logger.Info(fmt.Sprintf(f, a...)) }}
	var plan *cells.Plan
	if *dryRun {
		plan, err = m.Plan(ctx, name, *to)
	} else {
		plan, err = m.Move(ctx, name, *to)
	}
	if err != nil {
		return err
	}
	return printPlan(os.Stdout, plan, *dryRun, *format == "json")
}

func printPlan(w io.Writer, p *cells.Plan, dryRun, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{"dry_run": dryRun, "plan": p})
	}
	verb := "moved"
	if dryRun {
		verb = "would move"
	}
	if p.Finish {
		fmt.Fprintf(w, "%s is in %s; what was left in %s is removed\n", p.Tenant, p.To, p.From)
		return nil
	}
	fmt.Fprintf(w, "%s %s (tenant id %d) from %s to %s\n", verb, p.Tenant, p.TenantID, p.From, p.To)
	if dryRun {
		fmt.Fprintf(w, "work in flight to settle first: %d\ntransaction ids the target uses up first: %d\n", p.InFlight, p.XIDGap)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tROWS")
	for _, r := range p.Rows {
		fmt.Fprintf(tw, "%s\t%d\n", r.Table, r.Rows)
	}
	return tw.Flush()
}

// openCells connects to the home cell and each of cellsFlag's, checking that each is
// the directory's cell of its name.
func openCells(ctx context.Context, homeURL, cellsFlag string) (map[string]*pgxpool.Pool, func(), error) {
	list, err := server.ParseCells(cellsFlag)
	if err != nil {
		return nil, nil, &exitError{code: 2, err: err}
	}
	pools := map[string]*pgxpool.Pool{}
	closeAll := func() {
		for _, p := range pools {
			p.Close()
		}
	}
	home, err := openMigratedPool(ctx, homeURL)
	if err != nil {
		return nil, nil, err
	}
	pools[cells.Home] = home
	for _, c := range list {
		p, err := openMigratedPool(ctx, c.URL)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("cell %s: %w", c.Name, err)
		}
		pools[c.Name] = p
		if err := cells.CheckCell(ctx, home, p, c.Name); err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	return pools, closeAll, nil
}

// createInCell is `oncebox tenant create NAME --cell CELL`: the directory places the
// tenant in the cell, then the cell creates it (a second try after a failure works).
func createInCell(ctx context.Context, homeURL, cellsFlag, name, cell string, out func(*tenant.Store, string) error) error {
	pools, closeAll, err := openCells(ctx, homeURL, cellsFlag)
	if err != nil {
		return err
	}
	defer closeAll()
	pool, ok := pools[cell]
	if !ok {
		return &exitError{code: 2, err: fmt.Errorf("--cell %s: not among --cells (ONCEBOX_CELLS)", cell)}
	}
	placed, err := cells.Placed(ctx, pools[cells.Home], name)
	if err != nil {
		return err
	}
	for cname, p := range pools {
		if _, err := tenant.NewStore(p).ByName(ctx, name); err == nil && cname != cell {
			return fmt.Errorf("%w: %q, in cell %s", tenant.ErrExists, name, cname)
		}
	}
	if placed.Cell != cell || placed.MovingTo != "" {
		if placed.MovingTo != "" {
			return fmt.Errorf("tenant %q is being moved", name)
		}
		if err := cells.Place(ctx, pools[cells.Home], name, cell); err != nil {
			return err
		}
	}
	return out(tenant.NewStore(pool), name)
}
