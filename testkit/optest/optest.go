// Package optest helps the tests of packages that drive an outbox.Outbox against a
// real Postgres (outbox's reconciler, vendorevents, the vendor adapters): build and start the
// Outbox, make a tenant, enqueue an op, read it by id, wait for a status or for its
// dispatch jobs to finish.
package optest

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// NewOutbox builds an Outbox on pool with the built-in tools of toolsCfg and vendors,
// timed for tests: jobs fetched every 50 ms, retried after 50 ms, timed out after 5 s.
// It is not started.
func NewOutbox(tb testing.TB, pool *pgxpool.Pool, toolsCfg tools.Config, vendors ...vendorapi.Vendor) *outbox.Outbox {
	tb.Helper()
	return NewOutboxFrom(tb, pool, outbox.Config{}, toolsCfg, vendors...)
}

// NewOutboxFrom is NewOutbox with the rest of base (such as its Reconcile, Observer or
// Logger): base's Pool, Tools, Vendors, Queues, FetchPollInterval and
// RetryBackoff are set as NewOutbox sets them.
func NewOutboxFrom(tb testing.TB, pool *pgxpool.Pool, base outbox.Config, toolsCfg tools.Config, vendors ...vendorapi.Vendor) *outbox.Outbox {
	tb.Helper()
	reg, err := outbox.NewRegistry(tools.Builtin(toolsCfg)...)
	require.NoError(tb, err)
	queues := map[string]dispatch.QueueConfig{}
	for _, v := range vendors {
		queues[v.Name()] = dispatch.QueueConfig{JobTimeout: 5 * time.Second}
	}
	cfg := base
	cfg.Pool, cfg.Tools, cfg.Vendors, cfg.Queues = pool, reg, vendors, queues
	cfg.FetchPollInterval = 50 * time.Millisecond
	cfg.RetryBackoff = func(int) time.Duration { return 50 * time.Millisecond }
	ob, err := outbox.New(cfg)
	require.NoError(tb, err)
	return ob
}

// Start works ob's jobs until the test ends.
func Start(tb testing.TB, ob *outbox.Outbox) {
	tb.Helper()
	require.NoError(tb, ob.Start(context.Background()))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ob.Stop(ctx)
	})
}

// Tenant creates a tenant named name and returns its id.
func Tenant(tb testing.TB, pool *pgxpool.Pool, name string) int64 {
	tb.Helper()
	var id int64
	require.NoError(tb, pool.QueryRow(context.Background(), "INSERT INTO oncebox_tenant (name) VALUES ($1) RETURNING id", name).Scan(&id))
	return id
}

// Enqueue records a call of tool with args, encoded as JSON, under key for tenant.
func Enqueue(tb testing.TB, ob *outbox.Outbox, tenant int64, key, tool string, args any) *outbox.Op {
	tb.Helper()
	raw, err := json.Marshal(args)
	require.NoError(tb, err)
	res, err := ob.Enqueue(context.Background(), outbox.EnqueueParams{TenantID: tenant, Key: key, Tool: tool, Args: raw})
	require.NoError(tb, err)
	return res.Op
}

// ByID reads tenant's op whose id is id.
func ByID(tb testing.TB, pool *pgxpool.Pool, ob *outbox.Outbox, tenant int64, id string) *outbox.Op {
	tb.Helper()
	// The outbox reads ops by key: look the key up first.
	var key string
	require.NoError(tb, pool.QueryRow(context.Background(), "SELECT idempotency_key FROM oncebox_op WHERE id = $1", id).Scan(&key))
	op, err := ob.Get(context.Background(), tenant, key)
	require.NoError(tb, err)
	return op
}

// WaitStatus polls, for 15 seconds at most, until tenant's op whose id is id has
// status, and returns it.
func WaitStatus(tb testing.TB, pool *pgxpool.Pool, ob *outbox.Outbox, tenant int64, id string, status protocol.Status) *outbox.Op {
	tb.Helper()
	var op *outbox.Op
	require.Eventually(tb, func() bool {
		op = ByID(tb, pool, ob, tenant, id)
		return op.Status == status
	}, 15*time.Second, 10*time.Millisecond, "op %s never reached %s", id, status)
	return op
}

// WaitJobsFinished waits until no dispatch job of the op can run again (each one
// completed, discarded or cancelled): from then on nothing more can be sent for it,
// so a check that nothing more was sent proves something without sleeping.
func WaitJobsFinished(tb testing.TB, pool *pgxpool.Pool, opID string) {
	tb.Helper()
	require.Eventually(tb, func() bool {
		var open int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE args->>'op_id' = $1
			AND state NOT IN ('completed', 'discarded', 'cancelled')`, opID).Scan(&open)
		return err == nil && open == 0
	}, 15*time.Second, 20*time.Millisecond, "the op's dispatch job never finished")
}

// SeedUnknown enqueues an op and records it as if a worker had sent it ago and then lost
// the answer: unknown, one finished attempt, no dispatch job left; staleKey marks its
// vendor key as replaying a stored failure. The reconciler's tests start from it.
func SeedUnknown(tb testing.TB, pool *pgxpool.Pool, ob *outbox.Outbox, tenant int64, key, tool string, args any, ago time.Duration, staleKey bool) *outbox.Op {
	tb.Helper()
	op := Enqueue(tb, ob, tenant, key, tool, args)
	ctx := context.Background()
	_, err := pool.Exec(ctx, "DELETE FROM river_job WHERE args->>'op_id' = $1", op.ID)
	require.NoError(tb, err)
	at := time.Now().Add(-ago)
	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET status = 'unknown', attempts = 1, attempt_token = gen_random_uuid(),
		dispatch_started_at = $2, key_first_sent_at = $2, stale_key = $3 WHERE id = $1`, op.ID, at, staleKey)
	require.NoError(tb, err)
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at, finished_at, outcome)
		SELECT id, 1, attempt_token, vendor_key, $2, $2, 'unknown' FROM oncebox_op WHERE id = $1`, op.ID, at)
	require.NoError(tb, err)
	return op
}

// WebhookFake starts a fake webhook receiver and a webhook vendor for the "hooks" target
// (and a "deadhooks" target nothing listens on); lookupPath "" leaves lookups
// unavailable.
func WebhookFake(tb testing.TB, cfg fakewebhook.Config, lookupPath string) (*fakewebhook.Server, *httptest.Server, *webhook.Vendor) {
	tb.Helper()
	fake := fakewebhook.New(cfg)
	srv := httptest.NewServer(fake)
	tb.Cleanup(srv.Close)
	dead := httptest.NewServer(nil)
	deadURL := dead.URL
	dead.Close()
	v, err := webhook.New(webhook.Config{
		Targets:    map[string]webhook.Target{"hooks": {BaseURL: srv.URL}, "deadhooks": {BaseURL: deadURL}},
		Timeout:    2 * time.Second,
		LookupPath: lookupPath,
	})
	require.NoError(tb, err)
	return fake, srv, v
}

// HookArgs are the args of a webhook op to the "hooks" target, told apart by n.
func HookArgs(n int) map[string]any {
	return map[string]any{"target": "hooks", "path": "/orders", "body": map[string]any{"n": n}}
}

// WaitKeyStatus polls the op under key until it reaches want, for at most within.
func WaitKeyStatus(tb testing.TB, ob *outbox.Outbox, tenant int64, key string, want protocol.Status, within time.Duration) *outbox.Op {
	tb.Helper()
	deadline := time.Now().Add(within)
	var op *outbox.Op
	for time.Now().Before(deadline) {
		var err error
		op, err = ob.Get(context.Background(), tenant, key)
		require.NoError(tb, err)
		if op.Status == want {
			return op
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("op %s: status %s after %s, want %s", key, op.Status, within, want)
	return nil
}

// Expired is the SET list of an UPDATE of oncebox_op that makes its ops look as if their
// time had passed: settled (last updated) longer ago than their retention, and their
// expires_at past, so that the purge takes the terminal ones.
const Expired = `expires_at = now() - interval '1 hour',
	updated_at = now() - interval '1 hour' - coalesce(retention, expires_at - created_at)`
