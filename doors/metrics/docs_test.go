package metrics_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOperationsDocListsEveryMetric: every metric this package registers (its Name in
// the source) is named in docs/operations.md's list of metrics.
func TestOperationsDocListsEveryMetric(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
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
			require.Contains(t, string(doc), "`"+m[1], "docs/operations.md does not list %s (%s)", m[1], path)
		}
	}
	require.Greater(t, found, 10)
}
