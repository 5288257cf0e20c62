package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/catalog"
)

// acmeCatalog is the acme tenant's own catalog over its own target: a write tool, an
// unsafe one and a read one.
func acmeCatalog(baseURL string) string {
	return `
targets:
  acmedesk:
    base_url: ` + baseURL + `
    lookup_path: /_lookup
tools:
  acme.create_ticket:
    description: Open an acme ticket.
    class: write
    target: acmedesk
    path: /acme/{customer_id}/tickets
    input_schema:
      type: object
      properties: {customer_id: {type: string}, subject: {type: string}}
      required: [customer_id, subject]
  acme.close:
    description: Close an acme account.
    class: unsafe
    target: acmedesk
    path: /acme/{customer_id}/close
    input_schema:
      type: object
      properties: {customer_id: {type: string}}
      required: [customer_id]
  acme.find:
    description: Find what an acme call made.
    class: read
    target: acmedesk
    path: /_lookup
    input_schema:
      type: object
      properties: {oncebox_op: {type: string}}
      required: [oncebox_op]
`
}

// tenantCatalogServer runs a whole server with the installation's catalog and the
// tenants acme and beta, acme with its own catalog (acme.yaml) over a target of its
// own. It returns the server, its URL, the tenants' agent tokens, acme's approver
// token, acme's file and acme's fake target.
func tenantCatalogServer(t *testing.T) (srv *server.Server, base, acme, beta, approver, acmeFile string, fake *fakewebhook.Server) {
	t.Helper()
	ctx := context.Background()
	fake = fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(fake)
	t.Cleanup(target.Close)
	installation := httptest.NewServer(fakewebhook.New(fakewebhook.Config{}))
	t.Cleanup(installation.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ToolsFile = writeCatalog(t, catalogFile(installation.URL))
	cfg.TenantCatalogs = t.TempDir()
	// acme's target listens on loopback, which a tenant's file reaches only when allowed.
	cfg.TenantEgressAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	acmeFile = filepath.Join(cfg.TenantCatalogs, "acme.yaml")
	require.NoError(t, os.WriteFile(acmeFile, []byte(acmeCatalog(target.URL)), 0o600))
	tenants := tenant.NewStore(pool)
	_, acme, err := tenants.Create(ctx, "acme")
	require.NoError(t, err)
	_, beta, err = tenants.Create(ctx, "beta")
	require.NoError(t, err)
	approver, err = tenants.NewTokenWithRole(ctx, "acme", tenant.RoleApprover)
	require.NoError(t, err)
	srv, base = runServer(t, ctx, cfg)
	return srv, base, acme, beta, approver, acmeFile, fake
}

func getTools(t *testing.T, base, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/v1/tools", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return readAll(t, resp)
}

// TestTenantCatalogOnlyItsTenants: acme's own tools are listed to acme (GET /v1/tools
// and MCP, beside the installation's) and work for it; to beta they do not exist:
// neither list shows them, and calling them gets the very answer a tool no one has
// gets, over HTTP (a write tool and a read tool) and MCP, which names none of acme's.
func TestTenantCatalogOnlyItsTenants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, base, acme, beta, _, _, fake := tenantCatalogServer(t)

	acmeList, betaList := getTools(t, base, acme), getTools(t, base, beta)
	require.Contains(t, acmeList, `"name":"acme.create_ticket"`)
	require.Contains(t, acmeList, `"name":"helpdesk.create_ticket"`)
	require.Contains(t, betaList, `"name":"helpdesk.create_ticket"`)
	require.NotContains(t, betaList, "acme.")

	status, body := postJSON(t, base, acme, "/v1/ops?wait=20s", "t-1", `{"tool":"acme.create_ticket","args":{"customer_id":"c1","subject":"Hi"}}`)
	require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, status, body)
	require.Contains(t, body, `"status":"succeeded"`, body)
	require.Equal(t, 1, fake.EffectCount())
	require.Equal(t, "/acme/c1/tickets", fake.Effects()[0].Path)

	// To beta, acme's write tool and read tool are as unknown as a tool no one has.
	for _, call := range []struct{ tool, key string }{{"acme.create_ticket", "b-1"}, {"acme.find", ""}} {
		args := `{"customer_id":"c2","subject":"Hi","oncebox_op":"x"}`
		status, body := postJSON(t, base, beta, "/v1/ops", call.key, `{"tool":"`+call.tool+`","args":`+args+`}`)
		nStatus, nBody := postJSON(t, base, beta, "/v1/ops", call.key, `{"tool":"nobody.tool","args":`+args+`}`)
		require.Equal(t, nStatus, status, body)
		require.Equal(t, nBody, strings.ReplaceAll(body, call.tool, "nobody.tool"))
		require.NotContains(t, body, "acme.create_ticket\",", "the known tools name none of acme's")
	}
	status, body = postJSON(t, base, beta, "/v1/ops", "b-2", `{"tool":"acme.create_ticket","args":{}}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, `"field":"tool"`)
	require.Equal(t, 1, fake.EffectCount(), "nothing of beta's reached acme's target")

	_, acmeTools := watchToolList(ctx, t, base, acme)
	_, betaTools := watchToolList(ctx, t, base, beta)
	require.Contains(t, acmeTools(), "acme_create_ticket")
	require.Contains(t, acmeTools(), "helpdesk_create_ticket")
	bt := betaTools()
	require.Contains(t, bt, "helpdesk_create_ticket")
	for name := range bt {
		require.False(t, strings.HasPrefix(name, "acme_"), "beta is offered %s", name)
	}
	cs := mcpSession(t, base, beta)
	_, callErr := cs.CallTool(ctx, &mcp.CallToolParams{Name: "acme_create_ticket", Arguments: map[string]any{"customer_id": "c3", "subject": "Hi"}})
	_, noneErr := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nobody_tool", Arguments: map[string]any{"customer_id": "c3", "subject": "Hi"}})
	require.Error(t, callErr)
	require.Error(t, noneErr)
	require.Equal(t, noneErr.Error(), strings.ReplaceAll(callErr.Error(), "acme_create_ticket", "nobody_tool"))
	require.Equal(t, 1, fake.EffectCount())
}

// TestTenantCatalogReload: acme's file changes (a tool's path moves, a tool appears)
// and a reload applies it without a restart: acme's MCP session is told and lists the
// new tool, beta's does not; an op accepted before keeps the path it was accepted
// under. A broken file, and one whose tool would shadow the installation's, are
// refused naming acme's file, the tool and the field, and acme's catalog in force stays.
func TestTenantCatalogReload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, base, acme, beta, approver, acmeFile, fake := tenantCatalogServer(t)
	changed, acmeTools := watchToolList(ctx, t, base, acme)
	_, betaTools := watchToolList(ctx, t, base, beta)

	status, body := postJSON(t, base, acme, "/v1/ops", "close-old", `{"tool":"acme.close","args":{"customer_id":"c1"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	require.Contains(t, body, `"status":"awaiting_approval"`)

	url := fakeURL(t, acmeFile)
	next := strings.Replace(acmeCatalog(url), "path: /acme/{customer_id}/close", "path: /v2/acme/{customer_id}/closure", 1) + `  acme.tag:
    description: Tag an acme ticket.
    class: write
    target: acmedesk
    path: /acme/tickets/{ticket}/tags
    input_schema:
      type: object
      properties: {ticket: {type: string}}
      required: [ticket]
`
	require.NoError(t, os.WriteFile(acmeFile, []byte(next), 0o600))
	require.NoError(t, srv.ReloadCatalog(ctx))
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("acme's MCP session was not told that its tool list changed")
	}
	require.Contains(t, acmeTools(), "acme_tag")
	require.NotContains(t, betaTools(), "acme_tag")
	status, body = postJSON(t, base, acme, "/v1/ops?wait=20s", "tag-1", `{"tool":"acme.tag","args":{"ticket":"T1"}}`)
	require.Contains(t, body, `"status":"succeeded"`, "%d %s", status, body)

	// A broken file is refused naming the file, the tool and the field.
	require.NoError(t, os.WriteFile(acmeFile, []byte(strings.Replace(next, "path: /acme/tickets/{ticket}/tags", "path: /acme/tickets/{nope}/tags", 1)), 0o600))
	err := srv.ReloadCatalog(ctx)
	var ce *catalog.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, acmeFile, ce.File)
	require.Equal(t, "acme.tag", ce.Name)
	require.Equal(t, "path", ce.Field)
	require.ErrorContains(t, err, acmeFile+`: tool "acme.tag": field path: `)

	// A tool of the installation's catalog cannot be shadowed.
	shadow := next + `  helpdesk.create_ticket:
    description: Not the installation's.
    class: write
    target: acmedesk
    path: /elsewhere
    input_schema: {type: object}
`
	require.NoError(t, os.WriteFile(acmeFile, []byte(shadow), 0o600))
	err = srv.ReloadCatalog(ctx)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, acmeFile, ce.File)
	require.Equal(t, "helpdesk.create_ticket", ce.Name)
	require.ErrorContains(t, err, "the installation's catalog")
	require.ErrorContains(t, err, "may not shadow it")

	// The catalog in force stays: acme.tag still works, at its path.
	status, body = postJSON(t, base, acme, "/v1/ops?wait=20s", "tag-2", `{"tool":"acme.tag","args":{"ticket":"T2"}}`)
	require.Contains(t, body, `"status":"succeeded"`, "%d %s", status, body)

	// The op accepted before the reload goes where it was defined to go.
	status, body = postJSON(t, base, approver, "/v1/ops/close-old/approve", "", `{"reason":"checked"}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Eventually(t, func() bool { return fake.EffectCount() == 3 }, 20*time.Second, 50*time.Millisecond)
	paths := map[string]bool{}
	for _, e := range fake.Effects() {
		paths[e.Path] = true
	}
	require.Equal(t, map[string]bool{"/acme/tickets/T1/tags": true, "/acme/tickets/T2/tags": true, "/acme/c1/close": true}, paths)
}

// fakeURL reads the base URL of acme's target back from its file.
func fakeURL(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	return strings.TrimSpace(strings.Split(strings.Split(string(b), "base_url: ")[1], "\n")[0])
}

// TestTenantCatalogOfNoTenantRefusesToStart: a file named after no tenant would be
// offered to no one: the server refuses to start, naming the file.
func TestTenantCatalogOfNoTenantRefusesToStart(t *testing.T) {
	t.Parallel()
	cfg, _ := newConfig(t)
	cfg.Roles = server.Roles{API: true}
	cfg.TenantCatalogs = t.TempDir()
	file := filepath.Join(cfg.TenantCatalogs, "ghost.yaml")
	require.NoError(t, os.WriteFile(file, []byte(acmeCatalog("http://127.0.0.1:1")), 0o600))
	_, err := server.New(context.Background(), cfg, nil)
	require.ErrorContains(t, err, file+`: no tenant is named "ghost"`)
}
