package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEListsEverySetting keeps the README's configuration table true: it is
// exactly what `oncebox config` prints, every flag and environment variable with its
// default, once each.
func TestREADMEListsEverySetting(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var table strings.Builder
	printSettings(&table)
	want := strings.TrimSpace(table.String())
	header := strings.SplitN(want, "\n", 2)[0]
	start := strings.Index(string(readme), header)
	require.GreaterOrEqual(t, start, 0, "README has no configuration table; paste `oncebox config`")
	got := string(readme[start:])
	if end := strings.Index(got, "\n\n"); end >= 0 {
		got = got[:end]
	}
	require.Equal(t, want, strings.TrimSpace(got), "README configuration table is out of date; paste `oncebox config`")
}
