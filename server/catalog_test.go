package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/client"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
)

// catalogFile is a tool catalog over one target at baseURL, with a write, an unsafe
// and a read tool.
func catalogFile(baseURL string) string {
	return `
targets:
  helpdesk:
    base_url: ` + baseURL + `
    lookup_path: /_lookup
tools:
  helpdesk.create_ticket:
    description: Open a support ticket for a customer.
    class: write
    target: helpdesk
    path: /customers/{customer_id}/tickets
    input_schema:
      type: object
      properties:
        customer_id: {type: string}
        subject: {type: string, maxLength: 20}
      required: [customer_id, subject]
      additionalProperties: false
  helpdesk.close_account:
    description: Close a customer's account for good.
    class: unsafe
    target: helpdesk
    path: /customers/{customer_id}/close
    input_schema:
      type: object
      properties: {customer_id: {type: string}}
      required: [customer_id]
  helpdesk.escalate:
    description: Escalate a ticket to a manager.
    class: write
    target: helpdesk
    path: /escalations
    approval: {mode: always}
    input_schema:
      type: object
      properties: {ticket: {type: string}}
      required: [ticket]
  helpdesk.find:
    description: Find what a ticket call made.
    class: read
    target: helpdesk
    path: /_lookup
    input_schema:
      type: object
      properties: {oncebox_op: {type: string}}
      required: [oncebox_op]
`
}

func writeCatalog(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tools.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// catalogServer runs a whole server (API and worker) with the catalog over a fake
// target that does not honour keys: once-only is oncebox's doing.
func catalogServer(t *testing.T) (base, token string, fake *fakewebhook.Server, pool *pgxpool.Pool) {
	t.Helper()
	fake = fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(fake)
	t.Cleanup(target.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ToolsFile = writeCatalog(t, catalogFile(target.URL))
	_, base = runServer(t, context.Background(), cfg)
	_, token, err := tenant.NewStore(pool).Create(context.Background(), "acme")
	require.NoError(t, err)
	return base, token, fake, pool
}

func postJSON(t *testing.T, base, token, path, key, body string) (int, string) {
	t.Helper()
	status, _, raw := apiRaw(t, context.Background(), base+path, http.MethodPost, token, key, body)
	return status, string(raw)
}

// TestCatalogWriteToolMakesOneObject: a catalog write tool enqueued twice, and eight
// times at once, makes one object at the target each time.
func TestCatalogWriteToolMakesOneObject(t *testing.T) {
	t.Parallel()
	base, token, fake, _ := catalogServer(t)
	args := `{"tool":"helpdesk.create_ticket","args":{"customer_id":"c 1","subject":"Broken"}}`
	for range 2 {
		status, body := postJSON(t, base, token, "/v1/ops?wait=20s", "ticket-1", args)
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, status, body)
		require.Contains(t, body, `"status":"succeeded"`, body)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			status, body := postJSON(t, base, token, "/v1/ops?wait=20s", "ticket-2", args)
			if status != http.StatusAccepted && status != http.StatusOK {
				t.Errorf("status %d: %s", status, body)
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return fake.EffectCount() == 2 }, 20*time.Second, 50*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	effects := fake.Effects()
	require.Len(t, effects, 2, "one object per key")
	for _, e := range effects {
		require.Equal(t, "/customers/c 1/tickets", e.Path, "the template is filled with the escaped argument")
		require.JSONEq(t, `{"customer_id":"c 1","subject":"Broken"}`, string(e.Body))
		require.NotEmpty(t, e.OpID)
	}
}

// TestCatalogUnsafeToolWaitsForApproval: an unsafe tool's op starts in
// awaiting_approval and the target sees nothing.
func TestCatalogUnsafeToolWaitsForApproval(t *testing.T) {
	t.Parallel()
	base, token, fake, _ := catalogServer(t)
	status, body := postJSON(t, base, token, "/v1/ops", "close-1", `{"tool":"helpdesk.close_account","args":{"customer_id":"c1"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	require.Contains(t, body, `"status":"awaiting_approval"`)
	time.Sleep(300 * time.Millisecond)
	require.Zero(t, fake.Requests())
}

// TestCatalogApprovalRule: a write tool whose approval rule is always waits for a
// person, through the approvals' policy type.
func TestCatalogApprovalRule(t *testing.T) {
	t.Parallel()
	base, token, fake, _ := catalogServer(t)
	status, body := postJSON(t, base, token, "/v1/ops", "esc-1", `{"tool":"helpdesk.escalate","args":{"ticket":"T-1"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	require.Contains(t, body, `"status":"awaiting_approval"`)
	time.Sleep(300 * time.Millisecond)
	require.Zero(t, fake.Requests())
}

// TestCatalogSchemaViolationIs400: arguments that break the input schema are refused
// with 400, the field and the rule; nothing reaches the target.
func TestCatalogSchemaViolationIs400(t *testing.T) {
	t.Parallel()
	base, token, fake, _ := catalogServer(t)
	for _, tc := range []struct{ args, field, rule string }{
		{`{"customer_id":"c1"}`, "args.subject", "required"},
		{`{"customer_id":"c1","subject":"a subject far too long for it"}`, "args.subject", "maxLength"},
		{`{"customer_id":"c1","subject":"s","x":1}`, "args.x", "additionalProperties"},
		{`{"customer_id":"..","subject":"s"}`, "args.customer_id", "path segment"},
		{`{"customer_id":"../../x","subject":"s"}`, "args.customer_id", `must not contain \"..\"`},
		{`{"customer_id":"a/b","subject":"s"}`, "args.customer_id", "one path segment"},
		{`{"customer_id":"a\\b","subject":"s"}`, "args.customer_id", "one path segment"},
		{`{"customer_id":"%2e%2e","subject":"s"}`, "args.customer_id", "one path segment"},
		{`{"customer_id":"a\u0007b","subject":"s"}`, "args.customer_id", "control characters"},
		{`{"customer_id":"a\nb","subject":"s"}`, "args.customer_id", "control characters"},
	} {
		status, body := postJSON(t, base, token, "/v1/ops", "bad", fmt.Sprintf(`{"tool":"helpdesk.create_ticket","args":%s}`, tc.args))
		require.Equal(t, http.StatusBadRequest, status, body)
		require.Contains(t, body, `"field":"`+tc.field+`"`, body)
		require.Contains(t, body, tc.rule, body)
	}
	require.Zero(t, fake.Requests())
}

// TestBrokenCatalogRefusesToStart: the server does not start on a broken catalog,
// and says which file, tool and field.
func TestBrokenCatalogRefusesToStart(t *testing.T) {
	t.Parallel()
	cfg, _ := newConfig(t)
	cfg.Roles = server.Roles{API: true}
	cfg.ToolsFile = writeCatalog(t, strings.Replace(catalogFile("http://127.0.0.1:1"), "maxLength: 20", "maxLength: -1", 1))
	_, err := server.New(context.Background(), cfg, nil)
	require.ErrorContains(t, err, cfg.ToolsFile+`: tool "helpdesk.create_ticket": field input_schema: not a valid JSON Schema 2020-12 at /properties/subject/maxLength`)
}

// TestCatalogThroughGoClient: the Go client lists every tool with its class and
// schema, calls a read tool at once (no op is written) and a write tool by name with
// raw arguments.
func TestCatalogThroughGoClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, token, fake, pool := catalogServer(t)
	c, err := client.New(client.Config{BaseURL: base, Token: token})
	require.NoError(t, err)

	list, err := c.Tools(ctx)
	require.NoError(t, err)
	classes := map[string]string{}
	for _, tool := range list {
		classes[tool.Name] = tool.Class
		require.Contains(t, string(tool.InputSchema), `"type":"object"`, tool.Name)
	}
	require.Equal(t, map[string]string{"helpdesk.create_ticket": "write", "helpdesk.close_account": "unsafe", "helpdesk.escalate": "write", "helpdesk.find": "read"}, classes)

	res, err := c.Enqueue(ctx, "ticket-c", "helpdesk.create_ticket", json.RawMessage(`{"customer_id":"c9","subject":"Hi"}`), &client.Opts{Wait: 20 * time.Second})
	require.NoError(t, err)
	require.Equal(t, "succeeded", string(res.Op.Status))

	answer, err := c.Read(ctx, "helpdesk.find", map[string]string{"oncebox_op": res.Op.ID})
	require.NoError(t, err)
	var found struct {
		Status int `json:"status"`
		Body   struct {
			Objects []struct {
				ID string `json:"id"`
			} `json:"objects"`
		} `json:"body"`
	}
	require.NoError(t, json.Unmarshal(answer, &found))
	require.Equal(t, 200, found.Status)
	require.Len(t, found.Body.Objects, 1, "the read tool sees the object the write tool made")
	require.Equal(t, fake.Effects()[0].ID, found.Body.Objects[0].ID)

	var ops int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op").Scan(&ops))
	require.Equal(t, 1, ops, "the read wrote no op")

	_, err = c.Read(ctx, "helpdesk.find", map[string]string{})
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusBadRequest, p.Status)
}

// TestCatalogLookupLagMustCoverTheJobTimeout: a catalog target that does not honour
// keys is reconciled through its lookup path, so the lookup lag must cover the webhook
// job timeout, as for the webhook tool.
func TestCatalogLookupLagMustCoverTheJobTimeout(t *testing.T) {
	t.Parallel()
	cfg, _ := newConfig(t)
	cfg.ToolsFile = writeCatalog(t, catalogFile("http://127.0.0.1:1"))
	cfg.WebhookLookupLag = 5 * time.Second
	_, err := server.New(context.Background(), cfg, nil)
	require.ErrorContains(t, err, "--webhook-lookup-lag 5s must be at least the webhook job timeout 30s (--webhook-job-timeout): catalog target")
}

// TestCatalogResultShapeSameHoweverSettled: a catalog op that was dispatched and one
// whose answer was lost and that the reconciler settled from the target's lookup have
// one result shape, {"status":..,"body":..}, the same bytes for the same answer: a
// replay cannot tell them apart.
func TestCatalogResultShapeSameHoweverSettled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(fake)
	t.Cleanup(target.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ToolsFile = writeCatalog(t, catalogFile(target.URL))
	cfg.ReconcileInterval = time.Second
	cfg.WebhookTimeout = 2 * time.Second
	cfg.WebhookLookupLag = 3 * time.Second
	cfg.Queues["webhook"] = dispatch.QueueConfig{MaxWorkers: 5, JobTimeout: 3 * time.Second}
	_, base := runServer(t, ctx, cfg)
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	args := `{"tool":"helpdesk.create_ticket","args":{"customer_id":"c1","subject":"Broken"}}`
	status, body := postJSON(t, base, token, "/v1/ops?wait=20s", "dispatched", args)
	require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, status, body)
	require.Contains(t, body, `"status":"succeeded"`)

	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect})
	status, body = postJSON(t, base, token, "/v1/ops", "reconciled", args)
	require.Equal(t, http.StatusAccepted, status, body)
	result := func(key string) (string, string, string) {
		var status, res, ref string
		require.NoError(t, pool.QueryRow(ctx, "SELECT status, coalesce(result::text, ''), coalesce(vendor_ref, '') FROM oncebox_op WHERE idempotency_key = $1", key).
			Scan(&status, &res, &ref))
		return status, res, ref
	}
	require.Eventually(t, func() bool {
		status, _, _ := result("reconciled")
		return status == "succeeded"
	}, 60*time.Second, 200*time.Millisecond)
	var events int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM oncebox_op_event e JOIN oncebox_op o ON o.id = e.op_id
		WHERE o.idempotency_key = 'reconciled' AND e.to_status = 'succeeded' AND e.kind LIKE 'reconcile%'`).Scan(&events))
	require.Equal(t, 1, events, "the second op was settled by the reconciler")
	require.Equal(t, 2, fake.EffectCount(), "one object per op")

	effects := fake.Effects()
	_, dispatched, dispatchedRef := result("dispatched")
	_, reconciled, reconciledRef := result("reconciled")
	require.JSONEq(t, `{"status":200,"body":{"id":"`+effects[0].ID+`","ok":true}}`, dispatched)
	require.JSONEq(t, `{"status":200,"body":{"id":"`+effects[1].ID+`","ok":true}}`, reconciled, "the lookup's answer, in the dispatch's shape")
	require.Equal(t, strings.ReplaceAll(dispatched, effects[0].ID, effects[1].ID), reconciled, "byte for byte")
	require.Equal(t, effects[0].ID, dispatchedRef)
	require.Equal(t, effects[1].ID, reconciledRef)
}
