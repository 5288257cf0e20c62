package client

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientLinksNoServer keeps the client light for the agents that embed it: no
// Postgres driver, no River, no server-side oncebox package (protocol holds what the
// client shares with the server).
func TestClientLinksNoServer(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case strings.Contains(pkg, "pgx"), strings.Contains(pkg, "riverqueue"),
			strings.HasPrefix(pkg, "github.com/oncebox/oncebox/") &&
				pkg != "github.com/oncebox/oncebox/client" && pkg != "github.com/oncebox/oncebox/protocol":
			t.Errorf("the client links %s", pkg)
		}
	}
}
