package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/release"
	"github.com/oncebox/oncebox/migrations"
	"github.com/oncebox/oncebox/testkit/dbtest"
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

// TestServeRefusesASchemaItCannotRunOn: serve stops at start, with one sentence, on a
// database with a contract migration this binary does not know, and on one that lacks
// a migration it knows.
func TestServeRefusesASchemaItCannotRunOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	db := "DATABASE_URL=" + dbtest.ConnString(t, pool)
	_, err := pool.Exec(ctx, "INSERT INTO oncebox_migration (version, name, contract) VALUES ($1, 'from_the_future', true)", migrations.Latest()+1)
	require.NoError(t, err)
	out, errOut, code := runCLI(t, "serve --addr 127.0.0.1:0", db)
	require.Equal(t, 1, code, out+errOut)
	require.Contains(t, errOut, fmt.Sprintf("oncebox: the database's schema has migration %03d, which binaries that do not know it cannot run on safely", migrations.Latest()+1))

	// The schema lacks its latest expand migration (and what comes after it: the
	// binary's own contract migrations may be missing, that one may not).
	needs := migrations.LatestExpand()
	_, err = pool.Exec(ctx, "DELETE FROM oncebox_migration WHERE version >= $1", needs)
	require.NoError(t, err)
	out, errOut, code = runCLI(t, "serve --addr 127.0.0.1:0", db)
	require.Equal(t, 1, code, out+errOut)
	require.Contains(t, errOut, fmt.Sprintf("oncebox: the database's schema is at migration %03d and this oncebox needs %03d: run oncebox migrate first", needs-1, needs))
}
