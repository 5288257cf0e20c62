package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/migrations"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestMigrateHoldsAContractMigration: `oncebox migrate` applies what comes before a
// contract migration held by a live process of an older release, names the process and
// exits with status 3; with --wait it waits until the process is gone and applies it.
func TestMigrateHoldsAContractMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	all, err := migrations.All()
	require.NoError(t, err)
	l := migrations.Latest()
	next, err := migrations.Load(fstest.MapFS{
		fmt.Sprintf("%03d_old_table.up.sql", l+1): {Data: []byte("CREATE TABLE migrate_test_old (id int);\n")},
		fmt.Sprintf("%03d_drop_old.up.sql", l+2):  {Data: []byte(migrations.ContractMarker + "\nDROP TABLE migrate_test_old;\n")},
	})
	require.NoError(t, err)
	list := append(slices.Clip(all), next...)
	// Beating for the next hour: migrate may wait longer than a lease for the advisory
	// lock other tests' migrations hold.
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_process (id, version, commit, migration, protocol, host, pid, seen_at)
		VALUES ('old', 'v0.2.0', 'abc', $1, 2, 'host-a', 41, now() + interval '1 hour')`, l)
	require.NoError(t, err)

	var out bytes.Buffer
	err = migrate(ctx, pool, list, false, &out)
	var ee *exitError
	require.True(t, errors.As(err, &ee), "got %v", err)
	require.Equal(t, exitHeld, ee.code)
	require.Contains(t, err.Error(), fmt.Sprintf("contract migration %03d_drop_old is held: 1 live process(es) run a release that does not know it (v0.2.0 (knows up to %03d) on host-a pid 41, id old)", l+2, l))
	require.Equal(t, fmt.Sprintf("migrated: 0 River migration(s), 1 oncebox migration(s) applied; contract migration %03d held\n", l+2), out.String())

	var waiting lockedBuffer
	done := make(chan error, 1)
	go func() { done <- migrate(ctx, pool, list, true, &waiting) }()
	require.Eventually(t, func() bool { return strings.Contains(waiting.String(), "waiting: ") }, 30*time.Second, 10*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("--wait returned while the older process is live: %v", err)
	default:
	}
	_, err = pool.Exec(ctx, "UPDATE oncebox_process SET stopped = true WHERE id = 'old'")
	require.NoError(t, err)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(3*migrateWaitPoll + 5*time.Second):
		t.Fatal("--wait did not apply the contract migration once the process was gone")
	}
	require.Regexp(t, fmt.Sprintf(`^waiting: contract migration %03d_drop_old is held: .*\nmigrated: 0 River migration\(s\), 1 oncebox migration\(s\) applied\n$`, l+2), waiting.String())
	require.Equal(t, 0, dbtest.Count(t, pool, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'migrate_test_old'"))
}

// lockedBuffer is a bytes.Buffer that migrate writes to while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
