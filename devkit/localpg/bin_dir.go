package localpg

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// findBinDir returns the first folder holding both initdb and postgres:
// PATH first, then the usual install locations, highest version first.
func findBinDir(env func(string) (string, bool)) (string, bool) {
	var candidates []string
	if path, ok := env("PATH"); ok {
		candidates = append(candidates, filepath.SplitList(path)...)
	}
	candidates = append(candidates, globByVersion("/usr/lib/postgresql/*/bin", "/usr/lib/postgresql/")...)
	candidates = append(candidates, globByVersion("/usr/pgsql-*/bin", "/usr/pgsql-")...)
	candidates = append(candidates, globByVersion("/opt/homebrew/opt/postgresql*/bin", "/opt/homebrew/opt/postgresql")...)
	candidates = append(candidates, globByVersion("/usr/local/opt/postgresql*/bin", "/usr/local/opt/postgresql")...)

	for _, dir := range candidates {
		if dir == "" {
			continue
		}
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, true
		}
	}
	return "", false
}

// globByVersion returns the matches of pattern sorted by the version that
// follows prefix, highest first. A match without a version (Homebrew's
// unversioned "postgresql" formula) counts as the highest.
func globByVersion(pattern, prefix string) []string {
	matches, _ := filepath.Glob(pattern) // The patterns are constant and valid.
	version := func(dir string) []int {
		rest := strings.TrimPrefix(dir, prefix)
		rest = strings.TrimPrefix(rest, "@")
		rest, _, _ = strings.Cut(rest, "/")
		if rest == "" {
			return []int{1 << 30}
		}
		var parts []int
		for field := range strings.SplitSeq(rest, ".") {
			n, err := strconv.Atoi(field)
			if err != nil {
				break
			}
			parts = append(parts, n)
		}
		return parts
	}
	slices.SortStableFunc(matches, func(a, b string) int {
		return slices.Compare(version(b), version(a))
	})
	return matches
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}
