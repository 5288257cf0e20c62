package main

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
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
