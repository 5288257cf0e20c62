package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEListsEverySetting keeps the README's configuration table true: every flag
// and environment variable `oncebox config` prints is listed there, with its default.
func TestREADMEListsEverySetting(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var table strings.Builder
	printSettings(&table)
	for _, line := range strings.Split(strings.TrimSpace(table.String()), "\n") {
		require.Contains(t, string(readme), line, "README configuration table is out of date; paste `oncebox config`")
	}
}
