package outbox_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/stripe"
)

// sweepEnv is an Outbox and a tenant in a fresh schema, for the tests of what follows a
// sweep (manual review, vendor accounts). The reconciler's own tests are in package
// reconcile.
type sweepEnv struct {
	pool   *pgxpool.Pool
	ob     *outbox.Outbox
	tenant int64
}

// newSweepEnv builds an Outbox with the given vendors and reconciler configuration (not
// started).
func newSweepEnv(t *testing.T, vendors []vendorapi.Vendor, cfg reconcile.Config) *sweepEnv {
	t.Helper()
	return newSweepEnvFrom(t, vendors, outbox.Config{Reconcile: cfg})
}

// newSweepEnvFrom is newSweepEnv with more of the Outbox's configuration (its Logger).
func newSweepEnvFrom(t *testing.T, vendors []vendorapi.Vendor, base outbox.Config) *sweepEnv {
	t.Helper()
	pool := dbtest.Schema(t)
	ob := optest.NewOutboxFrom(t, pool, base, tools.Config{WebhookTargets: []string{"hooks", "deadhooks"}}, vendors...)
	return &sweepEnv{pool: pool, ob: ob, tenant: optest.Tenant(t, pool, "acme")}
}

// start works the Outbox's jobs until the test ends.
func (e *sweepEnv) start(t *testing.T) {
	t.Helper()
	optest.Start(t, e.ob)
}

func (e *sweepEnv) enqueue(t *testing.T, key, tool string, args any) *outbox.Op {
	t.Helper()
	return optest.Enqueue(t, e.ob, e.tenant, key, tool, args)
}

// seedUnknown records an op as if a worker had sent it ago and then lost the answer
// (optest.SeedUnknown).
func (e *sweepEnv) seedUnknown(t *testing.T, key, tool string, args any, ago time.Duration, staleKey bool) *outbox.Op {
	t.Helper()
	return optest.SeedUnknown(t, e.pool, e.ob, e.tenant, key, tool, args, ago, staleKey)
}

// get reads an op by id.
func (e *sweepEnv) get(t *testing.T, id string) *outbox.Op {
	t.Helper()
	return optest.ByID(t, e.pool, e.ob, e.tenant, id)
}

// waitStatus polls until the op reaches status.
func (e *sweepEnv) waitStatus(t *testing.T, id string, status protocol.Status) *outbox.Op {
	t.Helper()
	return optest.WaitStatus(t, e.pool, e.ob, e.tenant, id, status)
}

// sweep runs one sweep and fails the test on error.
func (e *sweepEnv) sweep(t *testing.T) reconcile.Stats {
	t.Helper()
	st, err := e.ob.ReconcileOnce(context.Background())
	require.NoError(t, err)
	return st
}

func (e *sweepEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return dbtest.Count(t, e.pool, sql, args...)
}

// stripeFake starts a fake Stripe and a Stripe vendor talking to it.
func stripeFake(t *testing.T) (*fakestripe.Server, *stripe.Vendor) {
	t.Helper()
	fake := fakestripe.New(fakestripe.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	v, err := stripe.New(stripe.Config{APIKey: "sk_test_reconcile", BaseURL: srv.URL, Timeout: 2 * time.Second})
	require.NoError(t, err)
	return fake, v
}

func piArgs(amount int64) map[string]any {
	return map[string]any{"amount": amount, "currency": "usd"}
}

func mailArgs() map[string]any {
	return map[string]any{"from": map[string]any{"email": "shop@example.com"},
		"to": []any{map[string]any{"email": "ada@example.com"}}, "subject": "Receipt", "text": "Thanks"}
}
