package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/localpg"
)

// TestHelpShowsNoSecret: with every secret setting's environment variable set to a
// marker (and a password in DATABASE_URL), no subcommand's --help, and no mistyped flag,
// prints one: the default reads "(from VAR)".
func TestHelpShowsNoSecret(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=postgres://oncebox:pw-marker-db@127.0.0.1:1/x?sslmode=disable"}
	markers := []string{"pw-marker-db"}
	for _, s := range settings() {
		if s.secret && s.env != "DATABASE_URL" {
			m := "marker-" + strings.ToLower(s.env)
			if s.env == "ONCEBOX_WEBHOOK_TARGETS" {
				m = `{"crm":{"base_url":"https://crm.example.com","secret_header":"X-S","secret":"marker-webhook-secret"}}`
				markers = append(markers, "marker-webhook-secret")
			} else {
				markers = append(markers, m)
			}
			env = append(env, s.env+"="+m)
		}
	}
	require.Contains(t, strings.Join(env, " "), "STRIPE_API_KEY=")
	require.Contains(t, strings.Join(env, " "), "ONCEBOX_ADMIN_TOKEN=")
	commands := []string{"serve", "dev", "migrate", "tenant", "tenant create", "tenant list", "tenant token create", "lookup",
		"approve", "reject", "review", "review list", "review resolve", "reconcile", "reconcile run", "reconcile report",
		"mcp", "bench", "healthcheck", "config", "tools", "tools check", "tools call", "version"}
	var all strings.Builder
	sawFrom := false
	for _, c := range commands {
		for _, extra := range []string{"--help", "--no-such-flag", "--stripe-api-keyy=x"} {
			out, errOut, _ := runCLI(t, c+" "+extra, env...)
			all.WriteString(out + errOut)
			sawFrom = sawFrom || strings.Contains(errOut, "(from STRIPE_API_KEY)")
		}
	}
	for _, args := range []string{"", "help", "nosuchcommand"} {
		out, errOut, _ := runCLI(t, args, env...)
		all.WriteString(out + errOut)
	}
	require.True(t, sawFrom, "serve --help names where the key comes from")
	require.Contains(t, all.String(), "(from DATABASE_URL)")
	for _, m := range markers {
		require.NotContains(t, all.String(), m)
	}
}

// TestDevPrintsNoDatabasePassword: the URL dev prints for the CLI has no password; it
// names a pgpass file (mode 0600) holding it, from which pgx finds it again.
func TestDevPrintsNoDatabasePassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pg := &localpg.Postgres{URL: "postgres://postgres:pw-7f3a:x@127.0.0.1:54329/oncebox?sslmode=disable", DataDir: filepath.Join(dir, "data")}
	printable, note, err := printableURL(pg)
	require.NoError(t, err)
	require.NotContains(t, printable, "pw-7f3a")
	require.NotContains(t, note, "pw-7f3a")
	require.Contains(t, note, pg.DataDir+".pgpass")
	info, err := os.Stat(pg.DataDir + ".pgpass")
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	cfg, err := pgconn.ParseConfig(printable)
	require.NoError(t, err)
	require.Equal(t, "pw-7f3a:x", cfg.Password, "pgx reads the password from the file the URL names")

	same, note, err := printableURL(&localpg.Postgres{URL: "postgres://postgres@127.0.0.1:5432/x"})
	require.NoError(t, err)
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/x", same, "no password: as it is")
	require.Empty(t, note)
}
