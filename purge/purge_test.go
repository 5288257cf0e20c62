package purge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/purge"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

type countingObserver struct {
	outbox.Observer
	enqueued map[string]int
}

func (c *countingObserver) Enqueued(_ int64, tool, kind string) { c.enqueued[kind]++ }

func TestPurgeDeletesExactlyTheExpiredOpsInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(echoTool("echo"))
	require.NoError(t, err)
	obs := &countingObserver{enqueued: map[string]int{}}
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Observer: obs})
	require.NoError(t, err)
	tenant := newTenant(t, pool, "acme")

	for i := 0; i < 25; i++ {
		_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: fmt.Sprintf("k%d", i), Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
		require.NoError(t, err)
	}
	// k0..k11 expired and settled; k12..k14 expired but unknown (kept); the rest live.
	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET status = 'succeeded', `+optest.Expired+`
		WHERE substr(idempotency_key, 2)::int < 12`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET expires_at = now() - interval '1 hour', status = 'unknown'
		WHERE substr(idempotency_key, 2)::int BETWEEN 12 AND 14`)
	require.NoError(t, err)

	st, err := ob.Purge(ctx, purge.Config{BatchSize: 5})
	require.NoError(t, err)
	require.Equal(t, 12, st.Ops)
	require.Equal(t, 3, st.Batches, "15 looked at: 5 + 5 + 5")
	require.Equal(t, 3, st.Deferred, "the unknown ones, kept")
	require.Equal(t, 13, count(t, pool, "SELECT count(*) FROM oncebox_op"))
	require.Equal(t, 12, count(t, pool, "SELECT count(*) FROM oncebox_tombstone"))
	require.Equal(t, 0, count(t, pool, "SELECT count(*) FROM oncebox_op WHERE substr(idempotency_key, 2)::int < 12"))

	// Reusing a purged key makes a new op, counted as a key-expiry collision.
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k3", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.True(t, res.ExpiryCollision)
	require.Equal(t, 1, obs.enqueued["expiry_collision"])

	// Tombstones go after their own TTL.
	_, err = pool.Exec(ctx, "UPDATE oncebox_tombstone SET purge_after = now() - interval '1 second' WHERE idempotency_key = 'k1'")
	require.NoError(t, err)
	st, err = ob.Purge(ctx, purge.Config{BatchSize: 5, TombstoneTTL: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 0, st.Ops)
	require.Equal(t, 1, st.Tombstones)
}

// echoTool is a minimal tool: args {"n": integer >= 0}.
func echoTool(vendor string) vendorapi.Tool {
	return vendorapi.Tool{
		Name:   "test.echo",
		Vendor: vendor,
		Validate: func(args json.RawMessage) error {
			var a struct {
				N *float64 `json:"n"`
			}
			if err := json.Unmarshal(args, &a); err != nil || a.N == nil || *a.N < 0 {
				return &vendorapi.ValidationError{Field: "args.n", Message: "must be an integer of at least 0"}
			}
			return nil
		},
	}
}

func newTenant(t *testing.T, pool *pgxpool.Pool, name string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(),
		"INSERT INTO oncebox_tenant (name) VALUES ($1) RETURNING id", name).Scan(&id))
	return id
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}
