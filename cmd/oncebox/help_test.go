package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// helpFlags are the flag names a --help output lists.
var helpFlags = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)

// TestEverySubcommandHelpShowsItsOwnFlags: `--help` of every subcommand of main.go exits
// 0; only serve and dev list the settings of a running server (--addr, workers, HTTP
// timeouts); and no secret of the environment is shown as a default.
func TestEverySubcommandHelpShowsItsOwnFlags(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=postgres://oncebox:pw-sentinel-db@127.0.0.1:1/x?sslmode=disable",
		"STRIPE_API_KEY=sk_sentinel_stripe", "SENDGRID_API_KEY=SG.sentinel_sendgrid", "ONCEBOX_SEAL_KEY=sentinel-seal"}
	serveOnly := []string{"addr", "roles", "stripe-workers", "http-write-timeout", "shutdown-grace", "admin-token", "purge-interval"}
	for _, c := range []string{"serve", "dev", "migrate", "tenant", "tenant policy", "policy", "lookup", "approve", "reject", "review",
		"reconcile", "mcp", "bench", "healthcheck", "config", "tools check", "version"} {
		out, errOut, code := runCLI(t, c+" --help", env...)
		text := out + errOut
		require.Equal(t, 0, code, "oncebox %s --help: %s", c, text)
		for _, s := range []string{"pw-sentinel-db", "sk_sentinel_stripe", "SG.sentinel_sendgrid", "sentinel-seal"} {
			require.NotContains(t, text, s, "oncebox %s --help shows a secret", c)
		}
		var names []string
		for _, m := range helpFlags.FindAllStringSubmatch(text, -1) {
			names = append(names, m[1])
		}
		require.NotEmpty(t, names, "oncebox %s --help lists its flags: %s", c, text)
		if c == "serve" || c == "dev" {
			require.Contains(t, names, "addr")
			continue
		}
		for _, f := range serveOnly {
			require.NotContains(t, names, f, "oncebox %s --help lists the serve-only --%s", c, f)
		}
		if strings.HasPrefix(c, "tenant") || c == "lookup" || c == "migrate" || c == "config" {
			require.Less(t, len(names), 12, "oncebox %s --help lists only its own flags: %v", c, names)
		}
	}
	_, errOut, _ := runCLI(t, "lookup --help", env...)
	names := []string{}
	for _, m := range helpFlags.FindAllStringSubmatch(errOut, -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	require.Equal(t, []string{"database-url", "json", "log-format", "log-level", "tenant"}, names)
	require.Contains(t, errOut, "(from DATABASE_URL)")
}
