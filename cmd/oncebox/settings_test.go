package main

import (
	"flag"
	"io"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/server"
)

func TestParseInterspersed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args       []string
		tenant     string
		reason     string
		positional []string
	}{
		{[]string{"--tenant", "acme", "KEY", "--reason", "found"}, "acme", "found", []string{"KEY"}},
		{[]string{"KEY", "--tenant=acme"}, "acme", "", []string{"KEY"}},
		{[]string{"--tenant", "acme", "--reason", "r", "KEY"}, "acme", "r", []string{"KEY"}},
		{[]string{"A", "--reason", "r", "B"}, "", "r", []string{"A", "B"}},
		{[]string{"--tenant", "acme", "--", "--not-a-flag", "KEY"}, "acme", "", []string{"--not-a-flag", "KEY"}},
		{nil, "", "", []string{}},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		tenant := fs.String("tenant", "", "")
		reason := fs.String("reason", "", "")
		require.NoError(t, parseInterspersed(fs, tc.args), "%q", tc.args)
		require.Equal(t, tc.tenant, *tenant, "%q", tc.args)
		require.Equal(t, tc.reason, *reason, "%q", tc.args)
		require.Equal(t, tc.positional, append([]string{}, fs.Args()...), "%q", tc.args)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	require.Error(t, parseInterspersed(fs, []string{"KEY", "--unknown"}))
}

// TestTenantConfinementSettings: --tenant-upstream-commands and --tenant-egress-allow
// (or their environment variables) default to none, and take comma-separated paths
// and ranges or single addresses; a value that is neither is refused.
func TestTenantConfinementSettings(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) (server.Config, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, _, err := parseConfig(fs, args)
		return cfg, err
	}
	cfg, err := parse()
	require.NoError(t, err)
	require.Empty(t, cfg.TenantUpstreamCommands)
	require.Empty(t, cfg.TenantEgressAllow)
	cfg, err = parse("--tenant-upstream-commands", "/usr/local/bin/crm-mcp, /opt/mcp/tickets",
		"--tenant-egress-allow", "10.1.0.0/16, 127.0.0.1,::1,10.2.3.4/8")
	require.NoError(t, err)
	require.Equal(t, []string{"/usr/local/bin/crm-mcp", "/opt/mcp/tickets"}, cfg.TenantUpstreamCommands)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8")}, cfg.TenantEgressAllow)
	_, err = parse("--tenant-egress-allow", "localhost")
	require.ErrorContains(t, err, `"localhost" is not an address range`)
}
