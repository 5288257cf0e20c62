package metrics_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEListsEveryMetric: every metric this package registers (its Name in the
// source) is named in the README's list of metrics.
func TestREADMEListsEveryMetric(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	sources, err := filepath.Glob("*.go")
	require.NoError(t, err)
	name := regexp.MustCompile(`Name:\s+"(oncebox_[a-z_]+)"`)
	found := 0
	for _, path := range sources {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, m := range name.FindAllStringSubmatch(string(src), -1) {
			found++
			require.Contains(t, string(readme), "`"+m[1], "the README does not list %s (%s)", m[1], path)
		}
	}
	require.Greater(t, found, 10)
}
