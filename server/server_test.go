package server_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/testkit/testlog"
	"github.com/oncebox/oncebox/vendors/webhook"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestRedactedFieldsNeverStoredLoggedOrAnswered sends an email through the whole server
// (API, worker, fake SendGrid) and then looks for its address and body everywhere
// oncebox writes: every table, the logs, and the API's answers.
func TestRedactedFieldsNeverStoredLoggedOrAnswered(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := dbtest.Schema(t)
	fake := fakesendgrid.New(fakesendgrid.Config{ActivityRatePerMinute: -1})
	// While the send is in flight (the op is dispatching), take a copy of every table:
	// the full arguments must not be there in clear even before the op settles.
	var inFlight strings.Builder
	sg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			inFlight.WriteString(dumpTables(t, pool))
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(sg.Close)

	var key [32]byte
	_, _ = rand.Read(key[:])
	cfg := server.Defaults()
	cfg.DatabaseURL = dbtest.ConnString(t, pool)
	cfg.Addr = "127.0.0.1:0"
	cfg.SendGridAPIKey, cfg.SendGridAPIBase = "SG.secret-key-value", sg.URL
	cfg.SealKey = base64.StdEncoding.EncodeToString(key[:])
	logs := &testlog.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := server.New(ctx, cfg, logger)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	const (
		address = "jane.doe@example.org"
		body    = "Your secret diagnosis is attached"
		subject = "Private matter"
	)
	payload := `{"tool":"sendgrid.mail","args":{"from":{"email":"clinic@example.com"},"to":[{"email":"` + address +
		`","name":"Jane Doe"}],"subject":"` + subject + `","text":"` + body + `"}}`
	base := "http://" + addr.String()
	post := func() (*http.Response, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/ops?wait=10s", strings.NewReader(payload))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "mail-1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, first := post()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, first)
	require.Contains(t, first, `"status":"succeeded"`)

	// The vendor got the real message: the sealed arguments were opened for dispatch.
	msgs := fake.Messages()
	require.Len(t, msgs, 1)
	require.Equal(t, []string{address}, msgs[0].To)

	resp, replay := post()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/ops/mail-1?history=true", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	getResp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	got, _ := io.ReadAll(getResp.Body)
	getResp.Body.Close()

	// Everything oncebox stored, as text, after the op settled.
	var dump strings.Builder
	dump.WriteString(dumpTables(t, pool))
	// Taken during the vendor call: a clean run writes nothing before it, so the op
	// reads pending while its dispatch job runs.
	require.Contains(t, inFlight.String(), `"status":"pending"`, "the in-flight copy was taken")
	require.Contains(t, inFlight.String(), `"state":"running"`, "the in-flight copy was taken")
	dump.WriteString(inFlight.String())
	var sealed int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op WHERE sealed_args IS NOT NULL").Scan(&sealed))
	require.Zero(t, sealed, "the sealed copy is dropped once the op is terminal")

	for _, secret := range []string{address, "Jane Doe", body, subject, "SG.secret-key-value"} {
		require.NotContains(t, dump.String(), secret, "database")
		require.NotContains(t, logs.String(), secret, "logs")
		require.NotContains(t, first, secret, "API answer")
		require.NotContains(t, replay, secret, "API replay")
		require.NotContains(t, string(got), secret, "API lookup")
	}
	require.NotContains(t, logs.String(), token, "the API token is never logged")
	require.Contains(t, dump.String(), "sha256:", "the redacted form is stored")
}

// TestMetricsMoveWithEnqueues checks the counters for new, replay, conflict and a
// key-expiry collision on the served /metrics.
func TestMetricsMoveWithEnqueues(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.Roles = server.Roles{API: true} // enqueue only: nothing is dispatched
	cfg.SendGridAPIKey, cfg.SendGridAPIBase = "SG.x", "http://127.0.0.1:1"
	cfg.SealKey = testSealKey()
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	h := srv.Handler()
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	post := func(key, subject string) int {
		body := `{"tool":"sendgrid.mail","args":{"from":{"email":"a@example.com"},"to":[{"email":"b@example.com"}],"subject":"` + subject + `","text":"x"}}`
		req := httptest.NewRequest(http.MethodPost, "/v1/ops", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	scrape := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		return rec.Body.String()
	}

	require.Equal(t, http.StatusAccepted, post("k1", "hello"))
	require.Equal(t, http.StatusOK, post("k1", "hello"))
	require.Equal(t, http.StatusOK, post("k1", "hello"))
	require.Equal(t, http.StatusUnprocessableEntity, post("k1", "other"))
	m := scrape()
	require.Contains(t, m, `oncebox_ops_enqueued_total{outcome="new",tool="sendgrid.mail"} 1`)
	require.Contains(t, m, `oncebox_ops_enqueued_total{outcome="replay",tool="sendgrid.mail"} 2`)
	require.Contains(t, m, `oncebox_ops_enqueued_total{outcome="conflict",tool="sendgrid.mail"} 1`)
	require.Contains(t, m, `oncebox_replay_hit_ratio 0.6666`)
	require.Contains(t, m, `oncebox_ops{status="pending",tool="sendgrid.mail"} 1`)
	require.Contains(t, m, `oncebox_river_queue_depth{queue="oncebox_sendgrid",state="available"} 1`)
	require.NotContains(t, m, "oncebox_key_expiry_collisions_total{")

	// Expire and purge the op, then reuse its key.
	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET status = 'succeeded', `+optest.Expired)
	require.NoError(t, err)
	st, err := srv.Outbox().Purge(ctx, outboxPurgeConfig())
	require.NoError(t, err)
	require.Equal(t, 1, st.Ops)
	require.Equal(t, http.StatusAccepted, post("k1", "hello again"))
	m = scrape()
	require.Contains(t, m, `oncebox_key_expiry_collisions_total{tool="sendgrid.mail"} 1`)
	require.Contains(t, m, `oncebox_ops_enqueued_total{outcome="new",tool="sendgrid.mail"} 2`)
}

func dumpTables(t *testing.T, pool *pgxpool.Pool) string {
	var dump strings.Builder
	for _, table := range []string{"oncebox_op", "oncebox_attempt", "oncebox_op_event", "river_job"} {
		rows, err := pool.Query(context.Background(), "SELECT row_to_json(t)::text FROM "+table+" t")
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			dump.WriteString(s)
		}
		rows.Close()
	}
	return dump.String()
}

// TestRiverUIAndMetricsNeedTheAdminToken mounts River UI behind the admin token.
func TestRiverUIAndMetricsNeedTheAdminToken(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, _ := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.Roles = server.Roles{API: true}
	cfg.AdminToken = "admin-secret"
	srv, base := runServer(t, ctx, cfg)

	get := func(path, password string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if password != "" {
			req.SetBasicAuth("ops", password)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, get("/riverui/", ""))
	require.Equal(t, http.StatusUnauthorized, get("/riverui/", "wrong"))
	require.Equal(t, http.StatusOK, get("/riverui/", "admin-secret"))
	require.Equal(t, http.StatusOK, get("/riverui/api/queues", "admin-secret"))
	require.Equal(t, http.StatusUnauthorized, get("/metrics", ""))
	require.Equal(t, http.StatusOK, get("/metrics", "admin-secret"))
	require.Equal(t, http.StatusOK, get("/healthz", ""))

	// API tokens with the operator role open both; agent, approver and a tenant's admin
	// tokens do not.
	_, agent, err := srv.Tenants().Create(ctx, "ops")
	require.NoError(t, err)
	approver, err := srv.Tenants().NewTokenWithRole(ctx, "ops", tenant.RoleApprover)
	require.NoError(t, err)
	admin, err := srv.Tenants().NewTokenWithRole(ctx, "ops", tenant.RoleAdmin)
	require.NoError(t, err)
	operator, err := srv.Tenants().NewTokenWithRole(ctx, "ops", tenant.RoleOperator)
	require.NoError(t, err)
	for _, path := range []string{"/riverui/api/queues", "/metrics"} {
		require.Equal(t, http.StatusOK, get(path, operator), path)
		require.Equal(t, http.StatusForbidden, get(path, agent), path)
		require.Equal(t, http.StatusForbidden, get(path, approver), path)
		require.Equal(t, http.StatusForbidden, get(path, admin), path)
	}
}

// TestRiverUIIsForOperatorsOnly: without --admin-token River UI is served to
// operator-role API tokens only; a tenant's admin token gets 403 with the reason (River UI
// shows every tenant's jobs), and /metrics stays open.
func TestRiverUIIsForOperatorsOnly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, _ := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.Roles = server.Roles{API: true}
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, agent, err := srv.Tenants().Create(ctx, "ops")
	require.NoError(t, err)
	admin, err := srv.Tenants().NewTokenWithRole(ctx, "ops", tenant.RoleAdmin)
	require.NoError(t, err)
	operator, err := srv.Tenants().NewTokenWithRole(ctx, "ops", tenant.RoleOperator)
	require.NoError(t, err)
	var body string
	get := func(path, token string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		raw, _ := io.ReadAll(resp.Body)
		body = string(raw)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, get("/riverui/api/queues", ""))
	require.Equal(t, http.StatusForbidden, get("/riverui/api/queues", agent))
	require.Equal(t, http.StatusForbidden, get("/riverui/", admin))
	require.Contains(t, body, "operator-only: this API token has the role admin")
	require.Equal(t, http.StatusForbidden, get("/riverui/api/queues", admin))
	require.Equal(t, http.StatusOK, get("/riverui/api/queues", operator))
	require.Equal(t, http.StatusOK, get("/metrics", ""))
}

func TestVendorLookupLagsComeFromTheConfig(t *testing.T) {
	t.Parallel()
	cfg, _ := newConfig(t)
	cfg.Roles = server.Roles{Worker: true}
	cfg.SendGridAPIKey = "SG.test"
	cfg.SealKey = testSealKey()
	cfg.SendGridLookupLag = 7 * time.Second
	cfg.StripeAPIKey = "sk_test_lags"
	cfg.StripeSearchLag = 11 * time.Second
	cfg.WebhookTargets = map[string]webhook.Target{"hooks": {BaseURL: "http://127.0.0.1:1"}}
	cfg.WebhookLookupPath = "/_lookup"
	cfg.WebhookLookupLag = 3 * time.Second
	cfg.Queues["webhook"] = dispatch.QueueConfig{MaxWorkers: 5, JobTimeout: 3 * time.Second}
	cfg.Queues["sendgrid"] = dispatch.QueueConfig{MaxWorkers: 5, JobTimeout: 7 * time.Second}
	cfg.SendGridTimeout = 5 * time.Second
	srv, err := server.New(context.Background(), cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)

	for name, want := range map[string]time.Duration{"sendgrid": 7 * time.Second, "webhook": 3 * time.Second} {
		v, ok := srv.VendorForTest(name)
		require.True(t, ok, name)
		require.Equal(t, want, v.LookupLag(), "%s: a lookup lag shorter than the vendor's would trust an empty answer too early", name)
	}
	v, ok := srv.VendorForTest("stripe")
	require.True(t, ok)
	require.GreaterOrEqual(t, v.LookupLag(), 5*time.Second)

	cfg.WebhookLookupLag = -time.Second
	_, err = server.New(context.Background(), cfg, nil)
	require.ErrorContains(t, err, "lookup lags must not be negative")
}

// newConfig returns the default configuration on a fresh schema of its own, and that
// schema's pool.
func newConfig(t *testing.T) (server.Config, *pgxpool.Pool) {
	t.Helper()
	pool := dbtest.Schema(t)
	cfg := server.Defaults()
	cfg.DatabaseURL = dbtest.ConnString(t, pool)
	return cfg, pool
}

// testSealKey returns a fresh ONCEBOX_SEAL_KEY value.
func testSealKey() string {
	var key [32]byte
	_, _ = rand.Read(key[:])
	return base64.StdEncoding.EncodeToString(key[:])
}

func TestRedactedMailNeedsASealKey(t *testing.T) {
	t.Parallel()
	cfg, _ := newConfig(t)
	cfg.Roles = server.Roles{API: true}
	cfg.SendGridAPIKey = "SG.x"
	_, err := server.New(context.Background(), cfg, nil)
	require.ErrorContains(t, err, "sendgrid.mail needs a seal key: set ONCEBOX_SEAL_KEY")
	require.ErrorContains(t, err, "ONCEBOX_SEAL_KEY")

	// Either a key or no redaction will do.
	cfg.SealKey = testSealKey()
	srv, err := server.New(context.Background(), cfg, nil)
	require.NoError(t, err)
	srv.Close()
	cfg.SealKey, cfg.RedactMail = "", false
	srv, err = server.New(context.Background(), cfg, nil)
	require.NoError(t, err)
	srv.Close()
}

func TestToolTTLOverridesTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, pool := newConfig(t)
	cfg.Roles = server.Roles{API: true}
	cfg.WebhookTargets = map[string]webhook.Target{"hooks": {BaseURL: "http://127.0.0.1:1"}}
	cfg.ToolTTL = map[string]time.Duration{"webhook.post": 720 * time.Hour}
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	res, err := srv.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "k", Tool: "webhook.post",
		Args: json.RawMessage(`{"target":"hooks","path":"/x","body":{}}`)})
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(720*time.Hour), res.Op.ExpiresAt, time.Minute)

	cfg.ToolTTL = map[string]time.Duration{"stripe.refundd": time.Hour}
	_, err = server.New(ctx, cfg, nil)
	require.ErrorContains(t, err, `unknown tool "stripe.refundd"`)
}

// bearerTransport adds an Authorization header to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestShutdownEndsMCPStreams: an MCP client keeps a stream open for as long as it
// listens; shutdown ends it instead of waiting out the whole grace period.
func TestShutdownEndsMCPStreams(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.Roles = server.Roles{API: true}
	cfg.ShutdownGrace = 20 * time.Second
	cfg.WebhookTargets = map[string]webhook.Target{"hooks": {BaseURL: "http://127.0.0.1:1"}}
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	transport := &mcp.StreamableClientTransport{Endpoint: "http://" + addr.String() + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: token}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, transport, nil)
	require.NoError(t, err)
	defer cs.Close()
	_, err = cs.ListTools(ctx, nil)
	require.NoError(t, err)

	start := time.Now()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
		require.Less(t, time.Since(start), 5*time.Second)
	case <-time.After(15 * time.Second):
		t.Fatal("shutdown waited on the MCP stream")
	}
}

// TestLookupLagMustCoverTheJobTimeout: for a vendor that does not deduplicate requests,
// a lookup lag shorter than the job timeout would trust an empty lookup while a
// request may still be on its way to a slow receiver: refused, with the flags named.
func TestLookupLagMustCoverTheJobTimeout(t *testing.T) {
	t.Parallel()
	cfg, _ := newConfig(t)
	cfg.Roles = server.Roles{Worker: true}
	cfg.WebhookTargets = map[string]webhook.Target{"hooks": {BaseURL: "http://127.0.0.1:1"}}
	cfg.WebhookLookupPath = "/_lookup"
	cfg.WebhookLookupLag = 5 * time.Second
	_, err := server.New(context.Background(), cfg, nil)
	require.ErrorContains(t, err, "--webhook-lookup-lag 5s must be at least the webhook job timeout 30s (--webhook-job-timeout)")

	// Targets that honour keys are resent under the same key instead: no constraint.
	cfg.WebhookNativeKeys = true
	srv, err := server.New(context.Background(), cfg, nil)
	require.NoError(t, err)
	srv.Close()

	cfg.SendGridAPIKey = "SG.test"
	cfg.SealKey = testSealKey()
	cfg.SendGridLookupLag = 10 * time.Second
	_, err = server.New(context.Background(), cfg, nil)
	require.ErrorContains(t, err, "--sendgrid-lookup-lag 10s must be at least the sendgrid job timeout 30s (--sendgrid-job-timeout)")
}

// TestTTLBelowTheKeyWindowIsRefused: ops kept for less than their vendor's idempotency
// key window would be purged while the vendor still remembers their keys: refused at
// start, naming the flag and the least value.
func TestTTLBelowTheKeyWindowIsRefused(t *testing.T) {
	t.Parallel()
	cfg, _ := newConfig(t)
	cfg.Roles = server.Roles{Worker: true}
	cfg.WebhookTargets = map[string]webhook.Target{"hooks": {BaseURL: "http://127.0.0.1:1"}}
	cfg.WebhookNativeKeys = true
	cfg.ToolTTL = map[string]time.Duration{"webhook.post": time.Hour}
	_, err := server.New(context.Background(), cfg, nil)
	require.ErrorContains(t, err, "webhook.post is kept 1h0m0s")
	require.ErrorContains(t, err, "set --ttl or --tool-ttl webhook.post=24h0m0s or more")

	cfg.ToolTTL = map[string]time.Duration{"webhook.post": 24 * time.Hour}
	srv, err := server.New(context.Background(), cfg, nil)
	require.NoError(t, err)
	srv.Close()
}
