package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// The tests of this package that drive a whole dispatch build an Outbox (outbox.New
// builds the Dispatcher), as reconcile's tests do: the webhook vendor against a fake
// receiver, in a fresh schema.

// webhookTool is the generic HTTP tool: args {"target","path","body"}.
func webhookTool() vendorapi.Tool {
	return vendorapi.Tool{
		Name:   "webhook.post",
		Vendor: "webhook",
		Validate: func(args json.RawMessage) error {
			var a struct {
				Target string `json:"target"`
			}
			if err := json.Unmarshal(args, &a); err != nil || a.Target == "" {
				return &vendorapi.ValidationError{Field: "args.target", Message: "is required"}
			}
			return nil
		},
	}
}

// workerOpts are the settings of newWorkerOutbox's Outbox that a test changes.
type workerOpts struct {
	native      bool
	rescueAfter time.Duration
	jobTimeout  time.Duration
	clientID    string
}

// newWorkerOutbox builds an Outbox that dispatches webhook.post to targetURL (not
// started).
func newWorkerOutbox(t testing.TB, pool *pgxpool.Pool, targetURL string, o workerOpts) *outbox.Outbox {
	t.Helper()
	v, err := webhook.New(webhook.Config{
		Targets:           map[string]webhook.Target{"crm": {BaseURL: targetURL, SecretHeader: "X-Secret", Secret: "s3cret"}},
		Timeout:           cmpDur(o.jobTimeout, 5*time.Second),
		NativeIdempotency: o.native,
		LookupPath:        "/_lookup",
	})
	require.NoError(t, err)
	reg, err := outbox.NewRegistry(webhookTool())
	require.NoError(t, err)
	batched := false
	ob, err := outbox.New(outbox.Config{
		Pool:                 pool,
		Tools:                reg,
		Vendors:              []vendorapi.Vendor{v},
		Queues:               map[string]dispatch.QueueConfig{"webhook": {MaxWorkers: 10, JobTimeout: cmpDur(o.jobTimeout, 10*time.Second)}},
		RescueStuckJobsAfter: cmpDur(o.rescueAfter, time.Minute),
		RetryBackoff:         func(int) time.Duration { return 100 * time.Millisecond },
		TestOnly:             true,
		ClientID:             o.clientID,
		BatchedCompletion:    &batched,
	})
	require.NoError(t, err)
	return ob
}

func cmpDur(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func startWorker(t *testing.T, ob *outbox.Outbox) {
	t.Helper()
	require.NoError(t, ob.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ob.Stop(ctx)
	})
}

// newHonouringTarget serves a fake webhook receiver that deduplicates by
// Idempotency-Key, until the test ends.
func newHonouringTarget(t *testing.T) (*fakewebhook.Server, *httptest.Server) {
	t.Helper()
	fake := fakewebhook.New(fakewebhook.Config{HonourKeys: true})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv
}

func webhookArgs(n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"target":"crm","path":"/charge","body":{"n":%d}}`, n))
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

func newSchema(t *testing.T) *pgxpool.Pool { return dbtest.Schema(t) }
