package opstate

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
)

// seedAged inserts an op with a retention of an hour, created ago and in status, its
// expires_at created_at + retention as the enqueue stores it; settledAfter, when status
// is terminal, is how long after its creation it settled (its updated_at). It returns
// the op's id.
func (e *walkEnv) seedAged(t *testing.T, key string, status protocol.Status, ago, settledAfter time.Duration) string {
	t.Helper()
	var id string
	require.NoError(t, e.pool.QueryRow(context.Background(), `
		INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, vendor_key,
			created_at, updated_at, expires_at, retention)
		VALUES ($1, $2, 'echo', 'fake', '{}', '\x00', $3, 'vk', now() - $4::interval, now() - $4::interval + $5::interval,
			now() - $4::interval + interval '1 hour', interval '1 hour')
		RETURNING id::text`, e.tenant, key, status, ago.String(), settledAfter.String()).Scan(&id))
	return id
}

// expiryOf is an op's expiry as every reader shows it (OpColumns' expires_at).
func (e *walkEnv) expiryOf(t *testing.T, id string) time.Time {
	t.Helper()
	var at time.Time
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT `+expiry+` FROM oncebox_op WHERE id = $1`, id).Scan(&at))
	return at
}

func (e *walkEnv) exists(t *testing.T, id string) bool {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM oncebox_op WHERE id = $1`, id).Scan(&n))
	return n == 1
}

// TestPurgeKeepsAnOpItsRetentionFromItsSettling: an op is kept its retention from the
// moment it settled, whatever its expires_at says: an op that settled long after its
// creation is kept, one that settled quickly goes once its retention is over, and a
// settling that moves expires_at (as v0.1.0 and this release write it) and one that
// leaves it (as v0.3.0 will) are purged alike. Readers show that expiry.
func TestPurgeKeepsAnOpItsRetentionFromItsSettling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newWalkEnv(t)
	const tenDays = 240 * time.Hour
	// Open ten days (an approval, a review), settled a minute ago.
	late := e.seedAged(t, "late", protocol.StatusNeedsReview, tenDays, 0)
	lateMoved := e.seedAged(t, "late-moved", protocol.StatusNeedsReview, tenDays, 0)
	for _, settle := range []struct{ id, set string }{
		{late, ``}, // v0.3.0's settling leaves expires_at as the enqueue stored it
		{lateMoved, `, expires_at = now() - interval '1 minute' + coalesce(retention, expires_at - created_at)`}, // v0.1.0's
	} {
		_, err := e.pool.Exec(ctx, `UPDATE oncebox_op SET status = 'succeeded', updated_at = now() - interval '1 minute'`+settle.set+`
			WHERE id = $1`, settle.id)
		require.NoError(t, err)
	}
	quick := e.seedAged(t, "quick", protocol.StatusSucceeded, 2*time.Hour, time.Second)
	quickYoung := e.seedAged(t, "quick-young", protocol.StatusFailed, 30*time.Minute, time.Second)
	open := e.seedAged(t, "open", protocol.StatusUnknown, tenDays, 0)
	// Shown before the purge looks at them (it moves the expires_at of those it keeps).
	for _, id := range []string{late, lateMoved} {
		require.WithinDuration(t, time.Now().Add(59*time.Minute), e.expiryOf(t, id), 5*time.Second,
			"an op that settled a minute ago shows its retention (1h) from then")
	}
	var created time.Time
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT created_at FROM oncebox_op WHERE id = $1`, open).Scan(&created))
	require.Equal(t, created.Add(time.Hour), e.expiryOf(t, open), "an open op shows its creation plus its retention, as before")

	res, err := e.m.Purge(ctx, 100, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 1, res.Ops)
	require.False(t, e.exists(t, quick), "settled quickly and kept its retention since: purged")
	for _, id := range []string{late, lateMoved, quickYoung, open} {
		require.True(t, e.exists(t, id))
	}
	require.Equal(t, created.Add(time.Hour), e.expiryOf(t, open), "the purge's move of expires_at changes nothing shown")

	// An hour passes: their retention since they settled is over.
	_, err = e.pool.Exec(ctx, `UPDATE oncebox_op SET updated_at = updated_at - interval '1 hour',
		expires_at = least(expires_at, now()) - interval '1 hour' WHERE id = ANY($1::uuid[])`, []string{late, lateMoved, quickYoung})
	require.NoError(t, err)
	res, err = e.m.Purge(ctx, 100, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 3, res.Ops)
	require.True(t, e.exists(t, open), "an op not terminal is never purged")
}

// TestV010PurgeKeepsAnOpThisReleaseSettledLate: v0.1.0's purge, which still runs during
// the rolling upgrade to this release, reads expires_at alone; so this release still
// moves it as an op settles (retentionStart), or v0.1.0 would delete an op settled ten
// days after its creation at once, and a retry of its key would run it again. Its
// sqlPurgeBatch is copied from v0.1.0 (80dc385). v0.3.0's clean run no longer moves it
// (clean runs happen only while no v0.1.0 process is live); every other settling still
// does. Compatibility with v0.1.0: it goes with retentionStart.
func TestV010PurgeKeepsAnOpThisReleaseSettledLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newWalkEnv(t)
	id := e.seedAged(t, "late", protocol.StatusUnknown, 240*time.Hour, 0)
	_, err := e.m.ApplyTx(ctx, Change{OpID: id, From: protocol.StatusUnknown, To: protocol.StatusSucceeded, By: Reconciler,
		Kind: "reconciled", Result: json.RawMessage(`{}`), VendorRef: "obj_1"})
	require.NoError(t, err)
	const v010PurgeBatch = `
WITH doomed AS (
	SELECT id FROM oncebox_op
	WHERE expires_at < now() AND status = ANY($3::text[])
	ORDER BY expires_at
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), deleted AS (
	DELETE FROM oncebox_op o USING doomed WHERE o.id = doomed.id
	RETURNING o.tenant_id, o.idempotency_key, o.fingerprint, o.generation
)
INSERT INTO oncebox_tombstone (tenant_id, idempotency_key, fingerprint, expired_at, purge_after, generation)
SELECT tenant_id, idempotency_key, fingerprint, now(), now() + make_interval(secs => $2), generation FROM deleted`
	tag, err := e.pool.Exec(ctx, v010PurgeBatch, 100, 3600, sources(Purged, Purge))
	require.NoError(t, err)
	require.Zero(t, tag.RowsAffected(), "v0.1.0's purge deleted an op that settled just now")
	require.True(t, e.exists(t, id))
}

// TestPurgeBatchLooksAtABoundedSet: ops that stayed open long (their insert-time
// expires_at passed days ago), settled or not, are looked at once by the purge, which
// moves their expires_at to the earliest time they may go; a batch never walks them
// again, nor walks past them to find the ops it deletes. The rows a batch looks at are
// read from its plan (EXPLAIN ANALYZE of sqlPurgeBatch, rolled back), not timed.
func TestPurgeBatchLooksAtABoundedSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newWalkEnv(t)
	// 2,000 ops open ten days and settled a minute ago (v0.3.0's settling, expires_at
	// left), 1,000 still open, both with the oldest expires_at; then 5 due ones.
	_, err := e.pool.Exec(ctx, `
		INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, vendor_key,
			created_at, updated_at, expires_at, retention)
		SELECT $1, 'k' || i, 'echo', 'fake', '{}', '\x00', CASE WHEN i <= 2000 THEN 'succeeded' ELSE 'needs_review' END, 'vk',
			now() - interval '10 days', CASE WHEN i <= 2000 THEN now() - interval '1 minute' ELSE now() - interval '10 days' END,
			now() - interval '10 days' + interval '1 hour', interval '1 hour'
		FROM generate_series(1, 3000) AS i`, e.tenant)
	require.NoError(t, err)
	for i := range 5 {
		e.seedAged(t, fmt.Sprintf("due%d", i), protocol.StatusSucceeded, 2*time.Hour, time.Second)
	}
	const batch = 100
	looked := e.purgeBatchLooksAt(t, batch)
	require.LessOrEqual(t, looked, batch, "one batch walked past the ops it keeps")

	res, err := e.m.Purge(ctx, batch, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 5, res.Ops)
	require.Equal(t, 3000, res.Deferred)
	require.Zero(t, e.purgeBatchLooksAt(t, batch), "the next batch walked the kept ops again")
	var early int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM oncebox_op WHERE expires_at < now() + interval '58 minutes'`).Scan(&early))
	require.Zero(t, early, "a kept op's expires_at is the earliest time it may go: its retention from its settling, or from now")
}

// purgeBatchLooksAt runs one sqlPurgeBatch under EXPLAIN ANALYZE in a transaction it
// rolls back, with the plan a large table gets (an ordered scan of the expires_at
// index, not a scan of the whole table), and returns the rows the scan looked at.
func (e *walkEnv) purgeBatchLooksAt(t *testing.T, batch int) int {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`)
	require.NoError(t, err)
	var out []byte
	require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sqlPurgeBatch, batch, 3600, sources(Purged, Purge)).Scan(&out))
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(out, &plans))
	var scans []planNode
	plans[0].Plan.walk(func(n planNode) {
		if n.Relation == "oncebox_op" && n.Index == "oncebox_op_expires_at" {
			scans = append(scans, n)
		}
	})
	require.Len(t, scans, 1, "no scan of the expires_at index: %s", out)
	s := scans[0]
	return int((s.Rows + s.Removed) * s.Loops)
}

// planNode is the part of an EXPLAIN (FORMAT JSON) node the test reads.
type planNode struct {
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Rows     float64    `json:"Actual Rows"`
	Loops    float64    `json:"Actual Loops"`
	Removed  float64    `json:"Rows Removed by Filter"`
	Plans    []planNode `json:"Plans"`
}

func (n planNode) walk(fn func(planNode)) {
	fn(n)
	for _, c := range n.Plans {
		c.walk(fn)
	}
}

// TestExpiryStatusesAreTheTerminalOnes keeps expiry's list of statuses equal to the
// ones the table lets the purge take.
func TestExpiryStatusesAreTheTerminalOnes(t *testing.T) {
	t.Parallel()
	m := regexp.MustCompile(`status IN \(([^)]*)\)`).FindStringSubmatch(expiry)
	require.NotNil(t, m, expiry)
	var listed []string
	for _, s := range strings.Split(m[1], ", ") {
		listed = append(listed, strings.Trim(s, "'"))
	}
	want := sources(Purged, Purge)
	slices.Sort(listed)
	slices.Sort(want)
	require.Equal(t, want, listed)
}
