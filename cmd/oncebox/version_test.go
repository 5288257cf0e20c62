package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/release"
	"github.com/oncebox/oncebox/migrations"
)

// TestVersionCommand: `oncebox version` names the release, the commit and the highest
// migration the binary knows, as text and as JSON, without a database; CHANGELOG.md has
// a section for the release.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCLI(t, "version")
	require.Zero(t, code, out+errOut)
	require.Contains(t, out, "oncebox "+release.Base+"\n")
	require.Contains(t, out, "commit ")
	require.Contains(t, out, "migration ")

	out, errOut, code = runCLI(t, "version --format json")
	require.Zero(t, code, out+errOut)
	var info versionInfo
	require.NoError(t, json.Unmarshal([]byte(out), &info))
	require.Equal(t, release.Base, info.Version)
	require.Equal(t, migrations.Latest(), info.Migration)
	require.NotEmpty(t, info.Commit)

	changelog, err := os.ReadFile("../../CHANGELOG.md")
	require.NoError(t, err)
	require.Contains(t, string(changelog), "## "+strings.TrimSuffix(release.Base, "-dev"), "CHANGELOG.md has a section for this version")
	prev, err := os.ReadFile("../../.ci/previous-release")
	require.NoError(t, err)
	require.Contains(t, string(changelog), strings.TrimSpace(string(prev)), "CHANGELOG.md names the previous release's commit")
}
