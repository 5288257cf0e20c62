package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLinksNoTestCode keeps test-only code out of the production binary: a plain
// `go build ./cmd/oncebox` must not link the testing package, testify or
// testcontainers-go (the container fallback of `oncebox dev` is linked only with
// -tags devcontainer; see dev_container.go).
func TestBinaryLinksNoTestCode(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" || strings.HasPrefix(pkg, "testing/") ||
			strings.HasPrefix(pkg, "github.com/stretchr/testify") ||
			strings.HasPrefix(pkg, "github.com/testcontainers/") ||
			strings.HasPrefix(pkg, "github.com/oncebox/oncebox/testkit/dbtest") ||
			strings.HasPrefix(pkg, "github.com/oncebox/oncebox/devkit/pgcontainer") {
			t.Errorf("cmd/oncebox links %s: test-only code in the production binary", pkg)
		}
	}
}
