package protocol

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly keeps protocol free of dependencies: the Go client and every
// agent that embeds it link it.
func TestStandardLibraryOnly(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg != "github.com/oncebox/oncebox/protocol" {
			t.Errorf("protocol imports %s; it must need the standard library only", pkg)
		}
	}
}
