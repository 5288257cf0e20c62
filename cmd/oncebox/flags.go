package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/migrations"
)

// Global flags: every subcommand takes them, before or after its own arguments, and
// Main moves those given before the subcommand's name after it.
const (
	flagDatabaseURL = "database-url"
	flagLogFormat   = "log-format"
	flagLogLevel    = "log-level"
)

// isGlobalFlag reports whether name (without dashes) is a global flag.
func isGlobalFlag(name string) bool {
	return name == flagDatabaseURL || name == flagLogFormat || name == flagLogLevel
}

// errNoDatabase is the one answer of every subcommand that needs Postgres when none is
// configured.
func errNoDatabase() error {
	return &exitError{code: 2, err: errors.New("no database configured: set DATABASE_URL or pass --database-url (oncebox dev finds or starts a Postgres of its own)")}
}

// envOr returns the environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// logFlags are --log-format and --log-level.
type logFlags struct {
	format, level string
}

// Default log levels: serve and dev log what they do (info); every other command logs
// warnings and errors only unless asked (--log-level info, or ONCEBOX_LOG_LEVEL).
const (
	serverLogLevel = "info"
	cliLogLevel    = "warn"
)

// addLogFlags registers --log-format and --log-level on fs, with their environment
// variables as defaults, else the text format and level.
func addLogFlags(fs *flag.FlagSet, level string) *logFlags {
	l := &logFlags{}
	fs.StringVar(&l.format, flagLogFormat, envOr("ONCEBOX_LOG_FORMAT", "text"), "log format: text or json (env ONCEBOX_LOG_FORMAT)")
	fs.StringVar(&l.level, flagLogLevel, envOr("ONCEBOX_LOG_LEVEL", level), "log level: debug, info, warn, error (env ONCEBOX_LOG_LEVEL; serve and dev default to info, the other commands to warn)")
	return l
}

// logger returns the logger the flags ask for, writing to standard error.
func (l *logFlags) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--log-level: %w", err)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, &exitError{code: 2, err: fmt.Errorf("--log-format %q: want text or json", l.format)}
}

// globalFlags are the global flags of a subcommand that does not take the serve
// settings (those get --database-url from settings()).
type globalFlags struct {
	url *string
	log *logFlags
}

// databaseURL is the --database-url flag's value, else DATABASE_URL's.
func (g *globalFlags) databaseURL() string { return *g.url }

// addGlobalFlags registers the global flags on fs.
func addGlobalFlags(fs *flag.FlagSet) *globalFlags {
	g := &globalFlags{log: addLogFlags(fs, cliLogLevel)}
	g.url = secretVar(fs, flagDatabaseURL, "DATABASE_URL", "", "Postgres URL (env DATABASE_URL)")
	return g
}

// openPool connects to the configured Postgres.
func (g *globalFlags) openPool(ctx context.Context) (*pgxpool.Pool, error) {
	return openPool(ctx, g.databaseURL())
}

// openPool connects to the Postgres at url and checks that it answers.
func openPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	if strings.TrimSpace(url) == "" {
		return nil, errNoDatabase()
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	return pool, nil
}

// openMigratedPool is openPool for a command that writes oncebox's tables: it refuses,
// with CheckSchema's sentence, a schema this binary cannot run on (a migration it knows
// not applied yet, as during a rolling upgrade before `oncebox migrate`), instead of
// failing on a column the older schema lacks.
func openMigratedPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pool, err := openPool(ctx, url)
	if err != nil {
		return nil, err
	}
	if _, err := migrations.CheckSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// parseArgs parses a subcommand's arguments with fs, flags anywhere (parseInterspersed),
// and makes a parse error a usage error (exit status 2).
func parseArgs(fs *flag.FlagSet, args []string) error {
	if err := parseInterspersed(fs, args); err != nil {
		return &exitError{code: 2, err: err}
	}
	return nil
}

// hoistGlobals moves the global flags given before the subcommand's name after it, so
// that `oncebox --database-url URL tenant list` is `oncebox tenant --database-url URL
// list`. It stops at the first argument that is not a global flag.
func hoistGlobals(args []string) []string {
	var globals []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if !isGlobalFlag(name) {
			break
		}
		n := 1
		if !hasValue && len(args) > 1 {
			n = 2
		}
		globals = append(globals, args[:n]...)
		args = args[n:]
	}
	if len(globals) == 0 || len(args) == 0 {
		return append(globals, args...)
	}
	return append([]string{args[0]}, append(globals, args[1:]...)...)
}

// parseInterspersed parses args with fs, letting flags come after positional arguments
// too ("review resolve --tenant acme KEY --succeeded pi_1 --reason R"); "--" ends the
// flags. fs.Args() then holds the positional arguments in order.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}
