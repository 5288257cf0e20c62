package migrations_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/migrations"
)

// TestCheckSchema: a binary runs on its own schema and on one newer only by expand
// migrations; it refuses, with one sentence, a schema that lacks a migration it knows
// and one with a contract migration it does not know. The check reads tables written by
// v0.1.0 (no contract column).
func TestCheckSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptySchema(t)
	latest := migrations.Latest()

	var se *migrations.SchemaError
	_, err := migrations.CheckSchema(ctx, pool)
	require.True(t, errors.As(err, &se), "an unmigrated database is refused: %v", err)
	require.Contains(t, err.Error(), "run oncebox migrate first")

	_, err = migrations.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	s, err := migrations.CheckSchema(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, latest, s.Applied)

	// The next release's expand migration: still fine.
	_, err = pool.Exec(ctx, "INSERT INTO oncebox_migration (version, name) VALUES ($1, 'next_expand')", latest+1)
	require.NoError(t, err)
	_, err = migrations.CheckSchema(ctx, pool)
	require.NoError(t, err)

	// A contract migration this binary does not know: refused.
	_, err = pool.Exec(ctx, "INSERT INTO oncebox_migration (version, name, contract) VALUES ($1, 'next_contract', true)", latest+2)
	require.NoError(t, err)
	_, err = migrations.CheckSchema(ctx, pool)
	require.True(t, errors.As(err, &se), "got %v", err)
	require.Equal(t, latest+2, se.Schema.Contract)
	require.Regexp(t, `^the database's schema has migration \d{3}, which binaries that do not know it cannot run on safely, and this oncebox knows migrations up to \d{3}: run a release that knows \d{3} or later \(oncebox version\)$`, err.Error())

	// v0.1.0's table has no contract column: read as no contract migration.
	_, err = pool.Exec(ctx, "DELETE FROM oncebox_migration WHERE version > $1", latest)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ALTER TABLE oncebox_migration DROP COLUMN contract")
	require.NoError(t, err)
	s, err = migrations.CheckSchema(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, migrations.Schema{Applied: latest}, s)
}

// TestMigrationsAfterTheFirstReleaseAreExpandOnly: a migration after v0.1.0's last (016)
// that is not marked contract (migrations.ContractMarker) may not drop, rename or narrow
// anything: the previous release's binary runs on it during a rolling upgrade.
func TestMigrationsAfterTheFirstReleaseAreExpandOnly(t *testing.T) {
	t.Parallel()
	const lastOfV010 = 16
	all, err := migrations.All()
	require.NoError(t, err)
	for _, m := range all {
		if m.Version <= lastOfV010 {
			continue
		}
		if bad := narrows(m); bad != "" {
			t.Errorf("migration %03d_%s: %q breaks the previous release's binary: make it expand-only, or mark it %q (older binaries then refuse to run on it, and oncebox migrate holds it while they are live) and say so in CHANGELOG.md",
				m.Version, m.Name, bad, migrations.ContractMarker)
		}
	}
}

// TestADropNeedsTheContractMarker: the check above refuses a DROP COLUMN without the
// marker line, and lets it pass with it; the marker in a comment's text or after code
// on a line is no marker.
func TestADropNeedsTheContractMarker(t *testing.T) {
	t.Parallel()
	const drop = "ALTER TABLE oncebox_op DROP COLUMN old;\n"
	list, err := migrations.Load(fstest.MapFS{
		"101_unmarked.up.sql":  {Data: []byte("-- drops what v0.2.0 reads\n" + drop)},
		"102_marked.up.sql":    {Data: []byte(migrations.ContractMarker + "\n" + drop)},
		"103_mentioned.up.sql": {Data: []byte("-- not " + migrations.ContractMarker + "\n" + drop)},
		"104_trailing.up.sql":  {Data: []byte("SELECT 1; " + migrations.ContractMarker + "\n" + drop)},
		"105_expand.up.sql":    {Data: []byte("ALTER TABLE oncebox_op ADD COLUMN new text;\n")},
	})
	require.NoError(t, err)
	got := map[string]string{}
	for _, m := range list {
		got[m.Name] = narrows(m)
	}
	require.Equal(t, map[string]string{"unmarked": "DROP COLUMN", "marked": "", "mentioned": "DROP COLUMN", "trailing": "DROP COLUMN", "expand": ""}, got)
}

// narrowing is what an expand-only migration must not do. DROP INDEX is in it: an older
// binary's ON CONFLICT may name a unique index, and its queries count on the others.
// DROP CONSTRAINT is not: dropping a check or a foreign key only widens.
var narrowing = regexp.MustCompile(`(?i)\b(DROP\s+(TABLE|COLUMN|TYPE|FUNCTION|TRIGGER|VIEW|INDEX)|RENAME|ALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE|SET\s+NOT\s+NULL|TRUNCATE)\b`)

// narrows returns the first narrowing statement of m's code (comments left out), or ""
// when m is expand-only or a contract migration.
func narrows(m migrations.Migration) string {
	if m.Contract {
		return ""
	}
	var code []string
	for _, line := range strings.Split(m.SQL, "\n") {
		if c, _, _ := strings.Cut(line, "--"); strings.TrimSpace(c) != "" {
			code = append(code, c)
		}
	}
	return narrowing.FindString(strings.Join(code, "\n"))
}
