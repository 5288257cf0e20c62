package catalog_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/vendorhttp"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/catalog"
)

// confinedEnv is the environment the confinement tests read.
var confinedEnv = map[string]string{
	"ONCEBOX_SEAL_KEY":             "v-seal",
	"STRIPE_API_KEY":               "v-stripe",
	"SENDGRID_API_KEY":             "v-sendgrid",
	"DATABASE_URL":                 "v-db",
	"ONCEBOX_TENANT_ACME_TOKEN":    "v-acme",
	"ONCEBOX_TENANT_ACME_EU_TOKEN": "v-acme-eu",
	"ONCEBOX_TENANT_BETA_TOKEN":    "v-beta",
}

// loadTenant writes content as tenant's file and loads it under conf.
func loadTenant(t *testing.T, tenant, content string, conf catalog.Confinement) (*catalog.Catalog, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), tenant+".yaml")
	require.NoError(t, os.WriteFile(file, []byte(content), 0o600))
	if conf.Tenants == nil {
		conf.Tenants = []string{"acme", "acme-eu", "beta"}
	}
	return catalog.LoadTenant(file, tenant, conf, func(k string) string { return confinedEnv[k] })
}

func deskWith(baseURL, secretEnv string) string {
	s := "targets:\n  desk:\n    base_url: " + baseURL + "\n"
	if secretEnv != "" {
		s += "    secret_header: X-Secret\n    secret_env: " + secretEnv + "\n"
	}
	return s + `tools:
  t.write:
    description: Write.
    class: write
    target: desk
    path: /w
    input_schema: {type: object}
`
}

// TestTenantReadsOnlyItsNamespace: a tenant's file reads ONCEBOX_TENANT_<NAME>_* only
// (secret_env, ${VAR} and $VAR in an upstream's headers and env), never the
// installation's variables nor another tenant's, including one whose namespace
// starts with its own (acme_eu's within acme's); the installation's file reads any.
func TestTenantReadsOnlyItsNamespace(t *testing.T) {
	t.Parallel()
	up := func(field, value string) string {
		if field == "headers" {
			return "upstreams:\n  up:\n    url: https://mcp.example.com/mcp\n    headers: {Authorization: \"" + value + "\"}\n"
		}
		return "upstreams:\n  up:\n    command: /usr/bin/mcp\n    env: {K: \"" + value + "\"}\n"
	}
	for name, c := range map[string]struct {
		tenant, file, field, variable, why string
	}{
		"seal key":        {"acme", deskWith("https://a.example.com", "ONCEBOX_SEAL_KEY"), "secret_env", "ONCEBOX_SEAL_KEY", "ONCEBOX_TENANT_ACME_*"},
		"stripe":          {"acme", deskWith("https://a.example.com", "STRIPE_API_KEY"), "secret_env", "STRIPE_API_KEY", "reads only its own"},
		"sendgrid":        {"acme", deskWith("https://a.example.com", "SENDGRID_API_KEY"), "secret_env", "SENDGRID_API_KEY", "reads only its own"},
		"database":        {"acme", deskWith("https://a.example.com", "DATABASE_URL"), "secret_env", "DATABASE_URL", "reads only its own"},
		"another tenant":  {"acme", deskWith("https://a.example.com", "ONCEBOX_TENANT_BETA_TOKEN"), "secret_env", "ONCEBOX_TENANT_BETA_TOKEN", "ONCEBOX_TENANT_ACME_*"},
		"longer prefix":   {"acme", deskWith("https://a.example.com", "ONCEBOX_TENANT_ACME_EU_TOKEN"), "secret_env", "ONCEBOX_TENANT_ACME_EU_TOKEN", "tenant acme-eu's namespace, ONCEBOX_TENANT_ACME_EU_*"},
		"unset is named":  {"acme", deskWith("https://a.example.com", "ONCEBOX_TENANT_BETA_NOPE"), "secret_env", "ONCEBOX_TENANT_BETA_NOPE", "reads only its own"},
		"header braces":   {"acme", up("headers", "Bearer ${ONCEBOX_SEAL_KEY}"), "headers", "ONCEBOX_SEAL_KEY", "reads only its own"},
		"header dollar":   {"beta", up("headers", "Bearer $ONCEBOX_TENANT_ACME_TOKEN"), "headers", "ONCEBOX_TENANT_ACME_TOKEN", "reads only its own"},
		"stdio env":       {"acme", up("env", "${STRIPE_API_KEY}"), "env", "STRIPE_API_KEY", "reads only its own"},
		"stdio env later": {"acme", up("env", "${ONCEBOX_TENANT_ACME_TOKEN}:${DATABASE_URL}"), "env", "DATABASE_URL", "reads only its own"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := loadTenant(t, c.tenant, c.file, catalog.Confinement{Commands: []string{"/usr/bin/mcp"}})
			var ce *catalog.Error
			require.ErrorAs(t, err, &ce)
			require.Equal(t, c.field, ce.Field)
			require.True(t, strings.HasSuffix(ce.File, c.tenant+".yaml"))
			require.ErrorContains(t, err, "tenant "+c.tenant+"'s catalog may not read the environment variable "+c.variable+": ")
			require.ErrorContains(t, err, c.why)
			require.NotContains(t, err.Error(), "v-", "no value in the error")
		})
	}
	// Its own, and the installation's file, read freely.
	c, err := loadTenant(t, "acme", deskWith("https://a.example.com", "ONCEBOX_TENANT_ACME_TOKEN"), catalog.Confinement{})
	require.NoError(t, err)
	require.Equal(t, "v-acme", c.Targets["desk"].Secret)
	c, err = loadTenant(t, "acme-eu", deskWith("https://a.example.com", "ONCEBOX_TENANT_ACME_EU_TOKEN"), catalog.Confinement{})
	require.NoError(t, err)
	require.Equal(t, "v-acme-eu", c.Targets["desk"].Secret)
	c, err = catalog.Parse("tools.yaml", []byte(deskWith("https://a.example.com", "ONCEBOX_SEAL_KEY")), func(k string) string { return confinedEnv[k] })
	require.NoError(t, err)
	require.Equal(t, "v-seal", c.Targets["desk"].Secret)

	// Two tenants whose names make one namespace read none of it.
	_, err = loadTenant(t, "acme_eu", deskWith("https://a.example.com", "ONCEBOX_TENANT_ACME_EU_TOKEN"),
		catalog.Confinement{Tenants: []string{"acme_eu", "acme-eu"}})
	require.ErrorContains(t, err, "tenants acme_eu and acme-eu have the same namespace ONCEBOX_TENANT_ACME_EU_*")
	require.Equal(t, "ONCEBOX_TENANT_ACME_EU_", catalog.Namespace("Acme EU"))
}

// TestTenantRunsOnlyAllowedCommands: a tenant's stdio upstream is refused unless its
// command is one --tenant-upstream-commands names, exactly.
func TestTenantRunsOnlyAllowedCommands(t *testing.T) {
	t.Parallel()
	stdio := func(cmd string) string {
		return "upstreams:\n  up:\n    command: " + cmd + "\n    args: [\"-c\", \"id\"]\n"
	}
	for _, c := range []struct {
		cmd     string
		allowed []string
	}{
		{"/bin/sh", nil},
		{"sh", []string{"/bin/sh"}},
		{"/bin/../bin/sh", []string{"/bin/sh"}},
		{"/usr/bin/mcp", []string{"/usr/bin/mcp-other"}},
	} {
		_, err := loadTenant(t, "acme", stdio(c.cmd), catalog.Confinement{Commands: c.allowed})
		var ce *catalog.Error
		require.ErrorAs(t, err, &ce, c.cmd)
		require.Equal(t, "command", ce.Field)
		require.ErrorContains(t, err, "tenant acme's catalog may not run "+c.cmd+" on the host")
	}
	c, err := loadTenant(t, "acme", stdio("/usr/bin/mcp"), catalog.Confinement{Commands: []string{"/usr/bin/mcp"}})
	require.NoError(t, err)
	require.Equal(t, "/usr/bin/mcp", c.Upstreams["up"].Command)
	// The installation's file runs what it names.
	_, err = catalog.Parse("tools.yaml", []byte(stdio("/bin/sh")), nil)
	require.NoError(t, err)
}

// TestTenantLiteralAddressesRefused: a tenant's target or upstream naming a refused
// address literally is refused at load, unless a range allows it; a public address or
// a name loads (a name is checked when connecting).
func TestTenantLiteralAddressesRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ url, addr, kind string }{
		{"http://127.0.0.1:8080", "127.0.0.1", "loopback"},
		{"http://[::1]:8080", "::1", "loopback"},
		{"http://[::ffff:127.0.0.2]/", "127.0.0.2", "loopback"},
		{"http://169.254.169.254/latest", "169.254.169.254", "link-local"},
		{"http://10.2.3.4", "10.2.3.4", "private (RFC 1918)"},
		{"https://172.20.0.1", "172.20.0.1", "private (RFC 1918)"},
		{"https://192.168.1.1", "192.168.1.1", "private (RFC 1918)"},
		{"http://[fd00::1]", "fd00::1", "private (unique local)"},
		{"http://[fe80::1%25eth0]", "fe80::1", "link-local"},
		{"http://0.0.0.0:80", "0.0.0.0", "unspecified (this network)"},
		{"http://[::]:80", "::", "unspecified"},
		{"http://224.0.0.1", "224.0.0.1", "multicast"},
	} {
		_, err := loadTenant(t, "acme", deskWith(c.url, ""), catalog.Confinement{})
		require.ErrorContains(t, err, `target "desk": field base_url: tenant acme's target desk may not connect to `+c.addr+": it is "+c.kind, c.url)
		_, err = loadTenant(t, "acme", "upstreams:\n  up:\n    url: "+c.url+"/mcp\n", catalog.Confinement{})
		require.ErrorContains(t, err, `upstream "up": field url: tenant acme's upstream up may not connect to `+c.addr, c.url)
	}
	allow := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}
	for _, url := range []string{"http://10.2.3.4", "http://127.0.0.1:8080", "https://203.0.113.7", "https://crm.example.com"} {
		_, err := loadTenant(t, "acme", deskWith(url, ""), catalog.Confinement{EgressAllow: allow})
		require.NoError(t, err, url)
	}
	_, err := loadTenant(t, "acme", deskWith("http://127.0.0.2", ""), catalog.Confinement{EgressAllow: allow})
	require.ErrorContains(t, err, "may not connect to 127.0.0.2")
	// The installation's file is not confined.
	_, err = catalog.Parse("tools.yaml", []byte(deskWith("http://127.0.0.1:8080", "")), nil)
	require.NoError(t, err)
}

// TestTenantTargetRefusedBeforeConnecting: a tenant's target named by a name that
// resolves to loopback (localhost) is refused when its op is sent, before any
// connection (the listener sees none): the op fails for good, egress_refused, and a
// read tool answers so. Allowed, the same target is reached.
func TestTenantTargetRefusedBeforeConnecting(t *testing.T) {
	t.Parallel()
	var conns, requests atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)

	c, err := loadTenant(t, "acme", deskWith(url, ""), catalog.Confinement{})
	require.NoError(t, err, "a name is checked when connecting")
	rt, err := c.Connect(catalog.Options{})
	require.NoError(t, err)
	_, err = rt.Vendors()[0].Dispatch(context.Background(), vendorapi.DispatchParams{OpID: "op1", Tool: "t.write", Args: []byte(`{}`), Attempt: 1})
	var de *vendorapi.DispatchError
	require.ErrorAs(t, err, &de)
	require.Equal(t, vendorapi.OutcomePermanent, de.Outcome)
	require.Equal(t, "egress_refused", de.Code)
	var ee *vendorhttp.EgressError
	require.True(t, errors.As(err, &ee), "%v", err)
	require.True(t, ee.Addr.IsLoopback())
	require.Zero(t, conns.Load(), "the target was connected to")

	c, err = loadTenant(t, "acme", deskWith(url, ""), catalog.Confinement{
		EgressAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	require.NoError(t, err)
	rt, err = c.Connect(catalog.Options{})
	require.NoError(t, err)
	_, err = rt.Vendors()[0].Dispatch(context.Background(), vendorapi.DispatchParams{OpID: "op2", Tool: "t.write", Args: []byte(`{}`), Attempt: 1})
	require.NoError(t, err)
	require.Equal(t, int64(1), requests.Load())
}
