package optest

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
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/stripe"
)

// Env is an Outbox and a tenant ("acme") in a fresh schema, for the tests of what
// follows a dispatch or a reconciler's sweep: the reconciler's own (package reconcile),
// manual review and vendor accounts (package outbox).
type Env struct {
	Pool   *pgxpool.Pool
	Ob     *outbox.Outbox
	Tenant int64
}

// NewEnv builds an Env: an Outbox of base's configuration with the built-in tools
// (webhook targets "hooks" and "deadhooks") and vendors, not started.
func NewEnv(tb testing.TB, base outbox.Config, vendors ...vendorapi.Vendor) *Env {
	tb.Helper()
	pool := dbtest.Schema(tb)
	ob := NewOutboxFrom(tb, pool, base, tools.Config{WebhookTargets: []string{"hooks", "deadhooks"}}, vendors...)
	return &Env{Pool: pool, Ob: ob, Tenant: Tenant(tb, pool, "acme")}
}

// Start works the Outbox's jobs until the test ends.
func (e *Env) Start(tb testing.TB) {
	tb.Helper()
	Start(tb, e.Ob)
}

// Enqueue enqueues an op for the Env's tenant.
func (e *Env) Enqueue(tb testing.TB, key, tool string, args any) *outbox.Op {
	tb.Helper()
	return Enqueue(tb, e.Ob, e.Tenant, key, tool, args)
}

// SeedUnknown records an op as if a worker had sent it ago and then lost the answer.
func (e *Env) SeedUnknown(tb testing.TB, key, tool string, args any, ago time.Duration, staleKey bool) *outbox.Op {
	tb.Helper()
	return SeedUnknown(tb, e.Pool, e.Ob, e.Tenant, key, tool, args, ago, staleKey)
}

// Get reads an op by id.
func (e *Env) Get(tb testing.TB, id string) *outbox.Op {
	tb.Helper()
	return ByID(tb, e.Pool, e.Ob, e.Tenant, id)
}

// WaitStatus polls until the op reaches status.
func (e *Env) WaitStatus(tb testing.TB, id string, status protocol.Status) *outbox.Op {
	tb.Helper()
	return WaitStatus(tb, e.Pool, e.Ob, e.Tenant, id, status)
}

// Reconcile runs one sweep of the reconciler and fails the test on error.
func (e *Env) Reconcile(tb testing.TB) reconcile.Stats {
	tb.Helper()
	st, err := e.Ob.ReconcileOnce(context.Background())
	require.NoError(tb, err)
	return st
}

// Count returns the count a SELECT count(*) query answers.
func (e *Env) Count(tb testing.TB, sql string, args ...any) int {
	tb.Helper()
	return dbtest.Count(tb, e.Pool, sql, args...)
}

// StripeFake starts a fake Stripe and a Stripe vendor talking to it.
func StripeFake(tb testing.TB) (*fakestripe.Server, *stripe.Vendor) {
	tb.Helper()
	fake := fakestripe.New(fakestripe.Config{})
	srv := httptest.NewServer(fake)
	tb.Cleanup(srv.Close)
	v, err := stripe.New(stripe.Config{APIKey: "sk_test_optest", BaseURL: srv.URL, Timeout: 2 * time.Second})
	require.NoError(tb, err)
	return fake, v
}

// PaymentArgs are a PaymentIntent's arguments for amount cents.
func PaymentArgs(amount int64) map[string]any {
	return map[string]any{"amount": amount, "currency": "usd"}
}

// MailArgs are a receipt's arguments.
func MailArgs() map[string]any {
	return map[string]any{"from": map[string]any{"email": "shop@example.com"},
		"to": []any{map[string]any{"email": "ada@example.com"}}, "subject": "Receipt", "text": "Thanks"}
}
