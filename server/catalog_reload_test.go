package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/catalog"
)

// reloadedCatalog is catalogFile after an edit: helpdesk.close_account moves to
// another path and requires a reason, and a new write tool helpdesk.tag appears.
func reloadedCatalog(baseURL string) string {
	c := strings.Replace(catalogFile(baseURL), `    path: /customers/{customer_id}/close
    input_schema:
      type: object
      properties: {customer_id: {type: string}}
      required: [customer_id]`, `    path: /v2/accounts/{customer_id}/closure
    input_schema:
      type: object
      properties: {customer_id: {type: string}, reason: {type: string}}
      required: [customer_id, reason]`, 1)
	return c + `  helpdesk.tag:
    description: Tag a ticket.
    class: write
    target: helpdesk
    path: /tickets/{ticket}/tags
    input_schema:
      type: object
      properties: {ticket: {type: string}, tag: {type: string}}
      required: [ticket, tag]
`
}

// TestCatalogReloadKeepsOpsOnTheirVersion: an unsafe op accepted under the first
// catalog waits for approval while the file changes and the server reloads it. After
// the reload a new op is validated against the new schema, the new tool is offered
// (API and MCP, whose session is told its list changed) and works, and a broken file
// is refused with the catalog in force kept; the old op, approved last, reaches the
// target at the path it was accepted under.
func TestCatalogReloadKeepsOpsOnTheirVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(fake)
	t.Cleanup(target.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ToolsFile = writeCatalog(t, catalogFile(target.URL))
	srv, base := runServer(t, ctx, cfg)
	tenants := tenant.NewStore(pool)
	_, token, err := tenants.Create(ctx, "acme")
	require.NoError(t, err)
	approver, err := tenants.NewTokenWithRole(ctx, "acme", tenant.RoleApprover)
	require.NoError(t, err)

	changed, mcpTools := watchToolList(ctx, t, base, token)
	require.NotContains(t, mcpTools(), "helpdesk_tag")

	status, body := postJSON(t, base, token, "/v1/ops", "close-old", `{"tool":"helpdesk.close_account","args":{"customer_id":"c1"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	require.Contains(t, body, `"status":"awaiting_approval"`)

	require.NoError(t, os.WriteFile(cfg.ToolsFile, []byte(reloadedCatalog(target.URL)), 0o600))
	require.NoError(t, srv.ReloadCatalog(ctx))

	// The new schema applies to new ops.
	status, body = postJSON(t, base, token, "/v1/ops", "close-new", `{"tool":"helpdesk.close_account","args":{"customer_id":"c2"}}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, `"field":"args.reason"`, body)
	status, body = postJSON(t, base, token, "/v1/ops", "close-new", `{"tool":"helpdesk.close_account","args":{"customer_id":"c2","reason":"asked"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	// The new tool is offered and works.
	status, body = postJSON(t, base, token, "/v1/ops?wait=20s", "tag-1", `{"tool":"helpdesk.tag","args":{"ticket":"T1","tag":"vip"}}`)
	require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, status, body)
	require.Contains(t, body, `"status":"succeeded"`, body)
	req, err := http.NewRequest(http.MethodGet, base+"/v1/tools", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	list := readAll(t, resp)
	require.Contains(t, list, `"name":"helpdesk.tag"`)
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("the MCP session was not told that its tool list changed")
	}
	tools := mcpTools()
	require.Contains(t, tools, "helpdesk_tag")
	require.Contains(t, tools["helpdesk_close_account"].InputSchema.(map[string]any)["required"], "reason")

	// A broken file is refused, naming file, tool and field; the catalog in force stays.
	require.NoError(t, os.WriteFile(cfg.ToolsFile, []byte(strings.Replace(reloadedCatalog(target.URL), "path: /tickets/{ticket}/tags", "path: /tickets/{nope}/tags", 1)), 0o600))
	err = srv.ReloadCatalog(ctx)
	var ce *catalog.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "helpdesk.tag", ce.Name)
	require.Equal(t, "path", ce.Field)
	require.ErrorContains(t, err, cfg.ToolsFile)
	status, body = postJSON(t, base, token, "/v1/ops?wait=20s", "tag-2", `{"tool":"helpdesk.tag","args":{"ticket":"T2","tag":"vip"}}`)
	require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, status, body)
	require.Contains(t, body, `"status":"succeeded"`, body)

	// The op accepted under the first catalog goes where it was defined to go.
	status, body = postJSON(t, base, approver, "/v1/ops/close-old/approve", "", `{"reason":"checked"}`)
	require.Equal(t, http.StatusOK, status, body)
	status, body = postJSON(t, base, approver, "/v1/ops/close-new/approve", "", `{"reason":"checked"}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Eventually(t, func() bool { return fake.EffectCount() == 4 }, 20*time.Second, 50*time.Millisecond)
	paths := map[string]bool{}
	for _, e := range fake.Effects() {
		paths[e.Path] = true
	}
	require.Equal(t, map[string]bool{"/tickets/T1/tags": true, "/tickets/T2/tags": true,
		"/customers/c1/close": true, "/v2/accounts/c2/closure": true}, paths)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// TestCatalogOpKeepsItsDefinitionAcrossARestart: an op accepted by a process that does
// not dispatch waits while the file changes the tool's path; the worker started
// afterwards with the changed file sends it to the path it was accepted under, and a
// new op to the new path.
func TestCatalogOpKeepsItsDefinitionAcrossARestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	fake := fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(fake)
	t.Cleanup(target.Close)
	cfg, pool := newConfig(t)
	cfg.ToolsFile = writeCatalog(t, catalogFile(target.URL))
	apiCfg := cfg
	apiCfg.Roles = server.Roles{API: true}
	first, err := server.New(ctx, apiCfg, nil)
	require.NoError(t, err)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	_, err = first.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "old", Tool: "helpdesk.create_ticket",
		Args: json.RawMessage(`{"customer_id":"c1","subject":"Broken"}`)})
	require.NoError(t, err)
	first.Close()

	require.NoError(t, os.WriteFile(cfg.ToolsFile, []byte(strings.Replace(catalogFile(target.URL),
		"path: /customers/{customer_id}/tickets", "path: /v2/tickets/{customer_id}", 1)), 0o600))
	cfg.Roles = server.Roles{API: true, Worker: true}
	second, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(second.Close)
	done := make(chan error, 1)
	go func() { done <- second.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, err = second.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "new", Tool: "helpdesk.create_ticket",
		Args: json.RawMessage(`{"customer_id":"c2","subject":"Broken"}`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return fake.EffectCount() == 2 }, 30*time.Second, 50*time.Millisecond)
	paths := map[string]bool{}
	for _, e := range fake.Effects() {
		paths[e.Path] = true
	}
	require.Equal(t, map[string]bool{"/customers/c1/tickets": true, "/v2/tickets/c2": true}, paths)
}
