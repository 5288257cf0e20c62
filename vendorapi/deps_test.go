package vendorapi_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// deps returns the packages pkg links, one per line, with whether each is in the
// standard library.
func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg).CombinedOutput()
	require.NoError(t, err, string(out))
	m := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		m[path] = std == "true"
	}
	return m
}

// TestStandardLibraryOnly: the vendor contract imports only the standard library, so an
// adapter links neither pgx nor River to implement it.
func TestStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	for path, std := range deps(t, "github.com/oncebox/oncebox/vendorapi") {
		if path == "github.com/oncebox/oncebox/vendorapi" {
			continue
		}
		require.True(t, std, "vendorapi links %s, which is not in the standard library", path)
	}
}

// TestAdaptersLinkNoDatabase: the built-in adapters and the built-in tools link
// neither pgx nor River.
func TestAdaptersLinkNoDatabase(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"./vendors/webhook", "./vendors/stripe", "./vendors/sendgrid", "./tools", "./vendortest"} {
		for path := range deps(t, "github.com/oncebox/oncebox/"+strings.TrimPrefix(pkg, "./")) {
			require.False(t, strings.HasPrefix(path, "github.com/jackc/pgx") || strings.HasPrefix(path, "github.com/riverqueue/"),
				"%s links %s", pkg, path)
		}
	}
}
