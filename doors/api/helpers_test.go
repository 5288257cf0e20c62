package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
)

// Tool calls used throughout the tests.
const (
	paymentBody       = `{"tool": "stripe.payment_intent", "args": {"amount": 1000, "currency": "usd"}}`
	smallRefundBody   = `{"tool": "stripe.refund", "args": {"payment_intent": "pi_123", "amount": 500}}`
	largeRefundBody   = `{"tool": "stripe.refund", "args": {"payment_intent": "pi_123", "amount": 20000}}`
	problemTypePrefix = "https://oncebox.dev/problems/"
)

// env is a Server over an insert-only Outbox (no vendors, so no job is worked) in a
// schema of its own.
type env struct {
	pool    *pgxpool.Pool
	ob      *outbox.Outbox
	gov     *governance.Governance
	tenants *tenant.Store
	srv     *api.Server
	// handler, when set, serves the requests instead of srv: the vendor event
	// endpoints, which serve mounts beside the API.
	handler http.Handler
}

func newEnv(tb testing.TB, adjust ...func(*api.Config)) *env {
	tb.Helper()
	pool := dbtest.Schema(tb)
	return newEnvOnPool(tb, pool, adjust...)
}

func newEnvOnPool(tb testing.TB, pool *pgxpool.Pool, adjust ...func(*api.Config)) *env {
	tb.Helper()
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"crm"}, RefundApprovalAbove: 10000})...)
	require.NoError(tb, err)
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg})
	require.NoError(tb, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(tb, err)
	tenants := tenant.NewStore(pool)
	cfg := api.Config{Outbox: ob, Governance: gov, Tenants: tenants, AuditLog: pool}
	for _, a := range adjust {
		a(&cfg)
	}
	srv, err := api.New(cfg)
	require.NoError(tb, err)
	return &env{pool: pool, ob: ob, gov: gov, tenants: tenants, srv: srv}
}

// newTenant creates a tenant and returns it with its token.
func (e *env) newTenant(tb testing.TB, name string) (*tenant.Tenant, string) {
	tb.Helper()
	t, token, err := e.tenants.Create(context.Background(), name)
	require.NoError(tb, err)
	// The payments the tests refund were made outside oncebox: the tenant adopts them.
	_, err = e.tenants.Adopt(context.Background(), name, "stripe", []string{"pi_123", "pi_1", "pi_2"}, "test")
	require.NoError(tb, err)
	return t, token
}

// newToken adds a token of the given role to the named tenant.
func (e *env) newToken(tb testing.TB, tenantName string, role tenant.Role) string {
	tb.Helper()
	token, err := e.tenants.NewTokenWithRole(context.Background(), tenantName, role)
	require.NoError(tb, err)
	return token
}

// req builds a request. A non-empty body is sent as application/json unless the
// caller sets another Content-Type afterwards.
func req(method, target, token, key, body string) *http.Request {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, target, nil)
	} else {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	return r
}

func (e *env) do(r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	if e.handler != nil {
		e.handler.ServeHTTP(rec, r)
		return rec
	}
	e.srv.ServeHTTP(rec, r)
	return rec
}

// post sends POST /v1/ops.
func (e *env) post(token, key, body string) *httptest.ResponseRecorder {
	return e.do(req(http.MethodPost, "/v1/ops", token, key, body))
}

// opBody is the decoded op JSON: the op as the Go client decodes it (protocol.Op),
// and its history.
type opBody struct {
	protocol.Op
	History *struct {
		Attempts []map[string]any `json:"attempts"`
		Events   []struct {
			Kind       string          `json:"kind"`
			FromStatus string          `json:"from_status"`
			ToStatus   string          `json:"to_status"`
			Actor      string          `json:"actor"`
			Detail     json.RawMessage `json:"detail"`
		} `json:"events"`
	} `json:"history"`
}

func decodeOp(tb testing.TB, rec *httptest.ResponseRecorder) opBody {
	tb.Helper()
	require.Equal(tb, "application/json", rec.Header().Get("Content-Type"), rec.Body.String())
	var op opBody
	require.NoError(tb, json.Unmarshal(rec.Body.Bytes(), &op), rec.Body.String())
	return op
}

// problemBody is the decoded problem document.
type problemBody struct {
	Type              string   `json:"type"`
	Title             string   `json:"title"`
	Status            int      `json:"status"`
	Detail            string   `json:"detail"`
	Field             string   `json:"field"`
	Rule              string   `json:"rule"`
	KnownTools        []string `json:"known_tools"`
	StoredFingerprint string   `json:"stored_fingerprint"`
	GivenFingerprint  string   `json:"given_fingerprint"`
	OpStatus          string   `json:"op_status"`
}

// requireProblem checks the status and the problem document, and returns it.
func requireProblem(tb testing.TB, rec *httptest.ResponseRecorder, status int, slug string) problemBody {
	tb.Helper()
	require.Equal(tb, status, rec.Code, rec.Body.String())
	require.Equal(tb, "application/problem+json", rec.Header().Get("Content-Type"))
	var p problemBody
	require.NoError(tb, json.Unmarshal(rec.Body.Bytes(), &p), rec.Body.String())
	require.Equal(tb, problemTypePrefix+slug, p.Type)
	require.Equal(tb, status, p.Status)
	require.NotEmpty(tb, p.Title)
	require.NotEmpty(tb, p.Detail)
	return p
}
