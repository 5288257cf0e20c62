package server_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/catalog"
)

// evilDesk is tenant evil's own catalog: a write tool and a read tool over its target
// desk at baseURL, whose settings extra adds to (such as a secret_env).
func evilDesk(baseURL, extra string) string {
	return `
targets:
  desk:
    base_url: ` + baseURL + `
` + extra + `
tools:
  evil.ticket:
    description: Open a ticket.
    class: write
    target: desk
    path: /tickets
    input_schema: {type: object, properties: {subject: {type: string}}, required: [subject]}
  evil.find:
    description: Find a ticket.
    class: read
    target: desk
    path: /tickets
    input_schema: {type: object}
`
}

// confinedConfig is a server's configuration with the tenants evil and beta, and a
// folder of tenant catalogs holding evil.yaml (returned), written by each case.
func confinedConfig(t *testing.T) (server.Config, string, string) {
	t.Helper()
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.TenantCatalogs = t.TempDir()
	tenants := tenant.NewStore(pool)
	_, token, err := tenants.Create(context.Background(), "evil")
	require.NoError(t, err)
	_, _, err = tenants.Create(context.Background(), "beta")
	require.NoError(t, err)
	return cfg, filepath.Join(cfg.TenantCatalogs, "evil.yaml"), token
}

// refusedAtStart writes content as evil.yaml and starts an API server, which must
// refuse to start with a *catalog.Error naming the file and the field; it returns
// the error's text.
func refusedAtStart(t *testing.T, cfg server.Config, file, content, field string) string {
	t.Helper()
	require.NoError(t, os.WriteFile(file, []byte(content), 0o600))
	cfg.Roles = server.Roles{API: true}
	srv, err := server.New(context.Background(), cfg, nil)
	if err == nil {
		srv.Close()
	}
	var ce *catalog.Error
	require.ErrorAs(t, err, &ce, "evil.yaml must be refused at start")
	require.Equal(t, file, ce.File)
	require.Equal(t, field, ce.Field, "%v", err)
	return err.Error()
}

// TestTenantCatalogReadsOnlyItsOwnVariables (issue 49, item 2): evil's file may read
// ONCEBOX_TENANT_EVIL_* only. Naming the seal key, the database URL or another tenant's
// variable, in secret_env, an upstream's header or a stdio upstream's env, refuses
// the file at load with a sentence naming the file, the tenant and the variable; its
// own variable reaches its target. Not parallel: it sets the environment.
func TestTenantCatalogReadsOnlyItsOwnVariables(t *testing.T) {
	t.Setenv("ONCEBOX_SEAL_KEY", "seal-value-1")
	t.Setenv("ONCEBOX_TENANT_BETA_TOKEN", "beta-value-2")
	t.Setenv("ONCEBOX_TENANT_EVIL_TOKEN", "evil-value-3")
	hook := fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(hook)
	t.Cleanup(target.Close)
	up := newUpstreamHTTP(t, fakemcp.New().Handler())
	cfg, file, token := confinedConfig(t)
	t.Setenv("DATABASE_URL", "postgres://db-value-4@db/prod") // after the test's own database is made
	cfg.TenantEgressAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	cfg.TenantUpstreamCommands = []string{"/bin/true"}
	secretEnv := func(name string) string {
		return evilDesk(target.URL, "    secret_header: X-Secret\n    secret_env: "+name)
	}
	for _, c := range []struct{ name, file, field, variable string }{
		{"seal key", secretEnv("ONCEBOX_SEAL_KEY"), "secret_env", "ONCEBOX_SEAL_KEY"},
		{"database", secretEnv("DATABASE_URL"), "secret_env", "DATABASE_URL"},
		{"another tenant's", secretEnv("ONCEBOX_TENANT_BETA_TOKEN"), "secret_env", "ONCEBOX_TENANT_BETA_TOKEN"},
		{"upstream header", "upstreams:\n  up:\n    url: " + up.URL + "\n    headers: {Authorization: \"Bearer ${ONCEBOX_SEAL_KEY}\"}\n", "headers", "ONCEBOX_SEAL_KEY"},
		{"stdio env", "upstreams:\n  up:\n    command: /bin/true\n    env: {K: \"$ONCEBOX_TENANT_BETA_TOKEN\"}\n", "env", "ONCEBOX_TENANT_BETA_TOKEN"},
	} {
		msg := refusedAtStart(t, cfg, file, c.file, c.field)
		require.Contains(t, msg, "tenant evil's catalog may not read the environment variable "+c.variable, c.name)
		require.NotRegexp(t, `value-\d`, msg, "%s: no value in the error", c.name)
	}
	require.Equal(t, 0, hook.EffectCount())

	// Its own variable is its own.
	require.NoError(t, os.WriteFile(file, []byte(secretEnv("ONCEBOX_TENANT_EVIL_TOKEN")), 0o600))
	_, base := runServer(t, context.Background(), cfg)
	status, body := postJSON(t, base, token, "/v1/ops?wait=20s", "own-1", `{"tool":"evil.ticket","args":{"subject":"Hi"}}`)
	require.Contains(t, body, `"status":"succeeded"`, "%d %s", status, body)
	require.Equal(t, 1, hook.EffectCount())
	require.Equal(t, "evil-value-3", hook.Effects()[0].Headers.Get("X-Secret"))
}

// TestTenantCatalogStartsNoProgram (issue 49, item 2): a stdio upstream in evil's file
// whose command no operator allowed is refused before anything starts, at start and
// at a reload: the program, which would create a marker file, never runs. Allowed
// with --tenant-upstream-commands, the same program runs.
func TestTenantCatalogStartsNoProgram(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stdio := func(marker string) string {
		return "upstreams:\n  up:\n    command: /bin/sh\n    args: [\"-c\", \"touch " + marker + "\"]\n"
	}
	hook := fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(hook)
	t.Cleanup(target.Close)
	cfg, file, _ := confinedConfig(t)
	cfg.TenantEgressAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	noMarker := func(marker string) {
		t.Helper()
		time.Sleep(300 * time.Millisecond) // a program started would have touched it by now
		_, err := os.Stat(marker)
		require.ErrorIs(t, err, os.ErrNotExist, "the tenant's program ran")
	}

	atStart := filepath.Join(dir, "at-start")
	require.NoError(t, os.WriteFile(file, []byte(stdio(atStart)), 0o600))
	api := cfg
	api.Roles = server.Roles{API: true}
	s, err := server.New(context.Background(), api, nil)
	if err == nil {
		s.Close()
	}
	noMarker(atStart)
	require.ErrorContains(t, err, file+`: upstream "up": field command: tenant evil's catalog may not run /bin/sh on the host`)
	require.ErrorContains(t, err, "--tenant-upstream-commands")

	require.NoError(t, os.WriteFile(file, []byte(evilDesk(target.URL, "")), 0o600))
	srv, _ := runServer(t, context.Background(), cfg)
	atReload := filepath.Join(dir, "at-reload")
	require.NoError(t, os.WriteFile(file, []byte(stdio(atReload)), 0o600))
	err = srv.ReloadCatalog(context.Background())
	noMarker(atReload)
	var ce *catalog.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, file, ce.File)
	require.Equal(t, "command", ce.Field)

	// Allowed, the program runs (and, being no MCP server, the file is refused after).
	allowed := filepath.Join(dir, "allowed")
	require.NoError(t, os.WriteFile(file, []byte(stdio(allowed)), 0o600))
	api.TenantUpstreamCommands = []string{"/bin/sh"}
	if s, err := server.New(context.Background(), api, nil); err == nil {
		s.Close()
	}
	require.FileExists(t, allowed)
}

// countingServer serves h on 127.0.0.1 and counts the connections it accepts.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			n.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, &n
}

// TestTenantCatalogEgress (issue 49, item 2): evil's target and upstream may not reach
// loopback. A literal address is refused at load (the target's base_url, the
// upstream's url: the upstream is never connected to); a name that resolves to one
// (localhost) is refused at connect time, before connect(2): the write op fails for
// good (egress_refused), the read tool answers so, the upstream cannot be listed, and
// neither listener ever sees a connection.
func TestTenantCatalogEgress(t *testing.T) {
	t.Parallel()
	hook := fakewebhook.New(fakewebhook.Config{})
	target, targetConns := countingServer(t, hook)
	up, upConns := countingServer(t, fakemcp.New().Handler())
	cfg, file, token := confinedConfig(t)

	msg := refusedAtStart(t, cfg, file, evilDesk(target.URL, ""), "base_url")
	require.Contains(t, msg, "tenant evil's target desk may not connect to 127.0.0.1: it is loopback (127.0.0.0/8)")
	require.Contains(t, msg, "--tenant-egress-allow")
	msg = refusedAtStart(t, cfg, file, "upstreams:\n  up:\n    url: "+up.URL+"\n", "url")
	require.Contains(t, msg, "tenant evil's upstream up may not connect to 127.0.0.1")
	require.Zero(t, upConns.Load(), "the upstream was connected to")

	byName := func(s *httptest.Server) string { return strings.Replace(s.URL, "127.0.0.1", "localhost", 1) }
	require.NoError(t, os.WriteFile(file, []byte(evilDesk(byName(target), "")), 0o600))
	srv, base := runServer(t, context.Background(), cfg)
	status, body := postJSON(t, base, token, "/v1/ops?wait=20s", "egress-1", `{"tool":"evil.ticket","args":{"subject":"Hi"}}`)
	require.Contains(t, body, `"status":"failed"`, "%d %s", status, body)
	require.Contains(t, body, `egress_refused`)
	status, body = postJSON(t, base, token, "/v1/ops", "", `{"tool":"evil.find","args":{}}`)
	require.Equal(t, http.StatusBadGateway, status, body)
	require.Contains(t, body, "egress_refused")
	require.Zero(t, targetConns.Load(), "the target was connected to")
	require.Equal(t, 0, hook.EffectCount())

	require.NoError(t, os.WriteFile(file, []byte("upstreams:\n  up:\n    url: "+byName(up)+"\n"), 0o600))
	err := srv.ReloadCatalog(context.Background())
	require.ErrorContains(t, err, "may not connect to")
	require.ErrorContains(t, err, file)
	require.Zero(t, upConns.Load(), "the upstream was connected to")
}

// TestTenantUpstreamCommandsAreAbsolute: an allowed command is a clean absolute path,
// which a tenant's command: must name exactly; anything else refuses the start.
func TestTenantUpstreamCommandsAreAbsolute(t *testing.T) {
	t.Parallel()
	cfg, _ := newConfig(t)
	cfg.Roles = server.Roles{API: true}
	for _, cmd := range []string{"sh", "/bin/../bin/sh", "bin/sh"} {
		cfg.TenantUpstreamCommands = []string{cmd}
		_, err := server.New(context.Background(), cfg, nil)
		require.ErrorContains(t, err, "--tenant-upstream-commands: \""+cmd+"\" is not a clean absolute path", cmd)
	}
}
