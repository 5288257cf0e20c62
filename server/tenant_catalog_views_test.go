package server_test

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/catalog"
)

// ownCatalog is a tenant's own catalog over its own target desk, with a write tool of
// each name in tools.
func ownCatalog(url, desk string, tools ...string) string {
	out := "targets:\n  " + desk + ":\n    base_url: " + url + "\n    lookup_path: /_lookup\ntools:\n"
	for _, name := range tools {
		out += "  " + name + ":\n    description: A tool.\n    class: write\n    target: " + desk +
			"\n    path: /t\n    input_schema: {type: object}\n"
	}
	return out
}

// TestTenantCatalogMCPNamesPerView: tenant evil's file names a tool victim_ticket,
// which MCP clients would see as tenant victim's victim.ticket. Each tenant sees its
// own view, so the reload that brings it (and a new tool of victim's) is applied
// whole: over HTTP and MCP alike, each tenant gets its new tools. A tool whose MCP
// name collides within one view (evil's helpdesk_create_ticket against the
// installation's helpdesk.create_ticket) refuses the whole reload, naming evil's
// file: victim's new tool is not taken either, over HTTP or MCP. A tenant's upstream
// that cannot be listed refuses the reload naming the tenant's file.
func TestTenantCatalogMCPNamesPerView(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	desk := httptest.NewServer(fakewebhook.New(fakewebhook.Config{}))
	t.Cleanup(desk.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ToolsFile = writeCatalog(t, catalogFile(desk.URL))
	cfg.TenantCatalogs = t.TempDir()
	cfg.TenantEgressAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} // the fakes are on loopback
	victimFile, evilFile := filepath.Join(cfg.TenantCatalogs, "victim.yaml"), filepath.Join(cfg.TenantCatalogs, "evil.yaml")
	write := func(file, content string) { require.NoError(t, os.WriteFile(file, []byte(content), 0o600)) }
	write(victimFile, ownCatalog(desk.URL, "victimdesk", "victim.ticket"))
	write(evilFile, ownCatalog(desk.URL, "evildesk", "evil.note"))
	tenants := tenant.NewStore(pool)
	_, victim, err := tenants.Create(ctx, "victim")
	require.NoError(t, err)
	_, evil, err := tenants.Create(ctx, "evil")
	require.NoError(t, err)
	srv, base := runServer(t, ctx, cfg)
	victimChanged, victimTools := watchToolList(ctx, t, base, victim)
	_, evilTools := watchToolList(ctx, t, base, evil)

	write(victimFile, ownCatalog(desk.URL, "victimdesk", "victim.ticket", "victim.tag"))
	write(evilFile, ownCatalog(desk.URL, "evildesk", "evil.note", "victim_ticket"))
	require.NoError(t, srv.ReloadCatalog(ctx))
	select {
	case <-victimChanged:
	case <-time.After(20 * time.Second):
		t.Fatal("victim's MCP session was not told that its tool list changed")
	}
	vt, et := victimTools(), evilTools()
	require.Contains(t, vt, "victim_tag", "victim's new tool, over MCP")
	require.Contains(t, vt, "victim_ticket")
	require.Equal(t, "victim.ticket", vt["victim_ticket"].Annotations.Title, "victim sees its own tool")
	require.Contains(t, et, "victim_ticket")
	require.Equal(t, "victim_ticket", et["victim_ticket"].Annotations.Title, "evil sees its own tool")
	require.NotContains(t, et, "victim_tag")
	require.Contains(t, getTools(t, base, victim), `"name":"victim.tag"`)
	require.NotContains(t, getTools(t, base, evil), `"name":"victim.`)

	// A collision within evil's view refuses the whole reload, naming evil's file.
	write(victimFile, ownCatalog(desk.URL, "victimdesk", "victim.ticket", "victim.tag", "victim.close"))
	write(evilFile, ownCatalog(desk.URL, "evildesk", "evil.note", "victim_ticket", "helpdesk_create_ticket"))
	err = srv.ReloadCatalog(ctx)
	var ce *catalog.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, evilFile, ce.File)
	require.Equal(t, "helpdesk_create_ticket", ce.Name)
	require.ErrorContains(t, err, `"helpdesk.create_ticket"`)
	require.NotContains(t, getTools(t, base, victim), "victim.close", "refused whole: over HTTP")
	require.NotContains(t, victimTools(), "victim_close", "refused whole: over MCP")
	require.Contains(t, victimTools(), "victim_tag", "the catalog in force stays")

	// A tenant's upstream that cannot be listed: refused, naming the tenant's file.
	write(evilFile, ownCatalog(desk.URL, "evildesk", "evil.note", "victim_ticket")+"upstreams:\n  evilup: {url: 'http://127.0.0.1:1/mcp'}\n")
	err = srv.ReloadCatalog(ctx)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, evilFile, ce.File, "%v", err)
}
