package api

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/oncebox/oncebox/protocol"
)

// TestProblemTypesDeclared checks that every problem slug the handlers answer with is a
// type package protocol declares (with its title), so that a client can rely on the
// list there.
func TestProblemTypesDeclared(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	slug := regexp.MustCompile(`newProblem\([^,]+, "([a-z-]+)"`)
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range slug.FindAllSubmatch(src, -1) {
			seen++
			s := string(m[1])
			if s == "internal" {
				continue
			}
			if protocol.ProblemTitle(problemBase+s) == protocol.ProblemTitle("") {
				t.Errorf("%s answers problem %q, which package protocol does not declare", f, s)
			}
		}
	}
	if seen == 0 {
		t.Fatal("found no newProblem call: the pattern is out of date")
	}
}
