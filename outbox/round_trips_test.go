package outbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// roundTrips records the statements a pool sends, one entry per round trip (a batch is
// one, its statements joined by " + ").
type roundTrips struct {
	mu   sync.Mutex
	on   bool
	sent []string
}

func (r *roundTrips) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// River's insert notification wakes the queue's fetchers; River sends it with some
	// inserts, at most once per FetchCooldown, whoever inserts: not counted.
	if r.on && !strings.Contains(s, "PGNotifyMany") {
		r.sent = append(r.sent, s)
	}
}

func (r *roundTrips) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.sent = true, nil
}

func (r *roundTrips) stop() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.sent
}

// firstWords names a statement by its first words (River's queries by their sqlc name).
func firstWords(sql string) string {
	f := strings.Fields(sql)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.record(firstWords(d.SQL))
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var words []string
	for _, q := range d.Batch.QueuedQueries {
		words = append(words, firstWords(q.SQL))
	}
	r.record(strings.Join(words, " + "))
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestEnqueueRoundTrips: a new op costs three round trips, as River's unique insert
// alone does (BEGIN, the insert, COMMIT): BEGIN goes with the op's insert, which also
// checks the tenant's approval rule this process remembers; then River's insert of the
// dispatch job, and COMMIT. A replay costs two, and a rule changed elsewhere one more
// read and the insert again.
func TestEnqueueRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := &roundTrips{}
	pool := dbtest.SchemaWithConfig(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = rt })
	reg, err := outbox.NewRegistry(echoTool("echo"))
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: newGate(t, pool, reg, nil)})
	require.NoError(t, err)
	tenantID := optest.Tenant(t, pool, "acme")
	enqueue := func(key string) *outbox.EnqueueResult {
		res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenantID, Key: key, Tool: "test.echo", Args: json.RawMessage(`{"n": 1}`)})
		require.NoError(t, err)
		return res
	}
	enqueue("first") // prepares the statements

	rt.start()
	require.False(t, enqueue("second").Replayed)
	sent := rt.stop()
	require.Len(t, sent, 3, "%q", sent)
	require.Equal(t, "begin + WITH ins AS", sent[0])
	require.Contains(t, sent[1], "JobInsertFastMany")
	require.Equal(t, "commit", sent[2])

	rt.start()
	require.True(t, enqueue("second").Replayed)
	require.Equal(t, []string{"begin + WITH ins AS", "commit"}, rt.stop())

	// Another process sets the tenant's rule: this one's memory is stale, and the insert
	// says so.
	other := newGate(t, pool, reg, nil)
	_, err = other.SetTenantRule(ctx, tenantID, "test.echo", governance.ApprovalRule{Mode: governance.ApprovalNever})
	require.NoError(t, err)
	rt.start()
	require.False(t, enqueue("third").Replayed)
	sent = rt.stop()
	require.Len(t, sent, 4, "%q", sent)
	require.Equal(t, []string{"begin + WITH ins AS", "SELECT rule, version"}, sent[:2],
		"the insert, which reads the rule's version, then the rule's one read")
	require.Contains(t, sent[2], "JobInsertFastMany")
	require.Equal(t, "commit", sent[3])
}
