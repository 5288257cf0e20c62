package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncebox/oncebox/cells"
	"github.com/oncebox/oncebox/server"
)

// parseServerArgs parses the arguments of a subcommand that builds a server (serve, mcp,
// and the commands that work on ops): every serve setting, the log flags, and the
// subcommand's own flags already on fs, anywhere in args. It refuses at once when no
// database is configured.
func parseServerArgs(fs *flag.FlagSet, args []string) (server.Config, *slog.Logger, error) {
	return parseServerArgsFor(fs, args, nil)
}

// parseServerArgsFor is parseServerArgs with only the settings show names as flags
// (parseConfigFor).
func parseServerArgsFor(fs *flag.FlagSet, args []string, show func(string) bool) (server.Config, *slog.Logger, error) {
	cfg, log, err := parseConfigFor(fs, args, show)
	if err != nil {
		return cfg, nil, &exitError{code: 2, err: err}
	}
	if cfg.DatabaseURL == "" {
		return cfg, nil, errNoDatabase()
	}
	logger, err := log.logger()
	if err != nil {
		return cfg, nil, err
	}
	return cfg, logger, nil
}

// offline builds a server that is not run, for a command that works on ops with the
// outbox and the vendors. A readOnly command (lookup, review list, reconcile report)
// records and sends nothing: it is not warned that no vendor is configured and needs no
// seal key.
func offline(ctx context.Context, cfg server.Config, logger *slog.Logger, readOnly bool) (*server.Server, error) {
	cfg.Cells = "" // inTenantCell chose the cell: the home cell unless a tenant is elsewhere
	cfg.Roles = server.Roles{Periodic: true}
	cfg.ReadOnly = readOnly
	return server.New(ctx, cfg, logger)
}

// tenantID returns the id of the tenant named by --tenant.
func tenantID(ctx context.Context, srv *server.Server, name string) (int64, error) {
	if name == "" {
		return 0, &exitError{code: 2, err: errors.New("--tenant is required")}
	}
	t, err := srv.Tenants().ByName(ctx, name)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == pgerrcode.UndefinedTable {
		return 0, errors.New("the database has no oncebox tables: run `oncebox migrate` with the same DATABASE_URL first")
	}
	if err != nil {
		return 0, err
	}
	return t.ID, nil
}

// inTenantCell points cfg at the cell of the named tenant when the installation has
// cells (--cells, ONCEBOX_CELLS): the directory in the home cell (DATABASE_URL) says
// which (docs/scaling.md). A command that names no tenant works on the home cell.
func inTenantCell(ctx context.Context, cfg *server.Config, tenant string) error {
	if cfg.Cells == "" {
		return nil
	}
	list, err := server.ParseCells(cfg.Cells)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	cfg.Cells = ""
	if tenant == "" {
		return nil
	}
	home, err := openPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer home.Close()
	placed, err := cells.Placed(ctx, home, tenant)
	if err != nil || placed.Cell == cells.Home {
		return err
	}
	for _, c := range list {
		if c.Name == placed.Cell {
			cfg.DatabaseURL = c.URL
			return nil
		}
	}
	return fmt.Errorf("tenant %q is in cell %s, which --cells (ONCEBOX_CELLS) does not name", tenant, placed.Cell)
}
