package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
)

// deadPool is a pool whose Postgres does not answer (nothing listens on port 1).
func deadPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// outageEnv is a server whose tokens are checked in a working database (or, with
// authDown, a dead one too) and whose ops live in a dead one.
func outageEnv(t *testing.T, authDown bool) (*env, string, string) {
	t.Helper()
	good := dbtest.Schema(t)
	tenants := tenant.NewStore(good)
	_, token, err := tenants.Create(context.Background(), "acme")
	require.NoError(t, err)
	approver, err := tenants.NewTokenWithRole(context.Background(), "acme", tenant.RoleApprover)
	require.NoError(t, err)
	if authDown {
		tenants = tenant.NewStore(deadPool(t))
	}
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"crm"}, RefundApprovalAbove: 10000})...)
	require.NoError(t, err)
	dead := deadPool(t)
	ob, err := outbox.New(outbox.Config{Pool: dead, Tools: reg})
	require.NoError(t, err)
	srv, err := api.New(api.Config{Outbox: ob, Tenants: tenants, AuditLog: dead})
	require.NoError(t, err)
	return &env{pool: good, ob: ob, tenants: tenants, srv: srv}, token, approver
}

// TestDatabaseOutageIs503: while Postgres cannot be reached, every route answers 503
// store-unavailable with Retry-After (never 500), telling the caller to retry with the
// same key; /healthz answers 503 too.
func TestDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	for _, authDown := range []bool{false, true} {
		e, token, approver := outageEnv(t, authDown)
		for _, r := range []*http.Request{
			req(http.MethodPost, "/v1/ops", token, "k1", paymentBody),
			req(http.MethodPost, "/v1/ops?wait=5s", token, "k1", paymentBody),
			req(http.MethodGet, "/v1/ops/k1", token, "", ""),
			req(http.MethodGet, "/v1/ops/k1?wait=5s", token, "", ""),
			req(http.MethodPost, "/v1/ops/k1/reject", approver, "", `{"reason": "no"}`),
			req(http.MethodPost, "/v1/ops/k1/approve", approver, "", ``),
		} {
			rec := e.do(r)
			p := requireProblem(t, rec, http.StatusServiceUnavailable, "store-unavailable")
			require.Equal(t, "5", rec.Header().Get("Retry-After"))
			require.Contains(t, p.Detail, "same Idempotency-Key")
		}
		rec := e.do(req(http.MethodGet, "/healthz", "", "", ""))
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
		require.Equal(t, "5", rec.Header().Get("Retry-After"))
	}
}
