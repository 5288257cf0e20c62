package catalog_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/catalog"
)

// acmeFile is a tenant's own catalog: a write tool whose path's object is owned.
const acmeFile = `
targets:
  acmedesk: {base_url: "https://acme.example.com"}
tools:
  acme.close_ticket:
    description: Close an acme ticket.
    class: write
    target: acmedesk
    path: /tickets/{ticket_id}/close
    owned: [ticket_id]
    input_schema: {type: object, properties: {ticket_id: {type: string}}, required: [ticket_id]}
`

func parse(t *testing.T, file, content string) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Parse(file, []byte(content), env)
	require.NoError(t, err)
	return c
}

// TestMergeMarksTenantTools: a tenant's tools, targets and upstreams carry its name
// and id, the installation's none; its outbox tools are its own (Tenant) and keep
// their owned objects.
func TestMergeMarksTenantTools(t *testing.T) {
	t.Parallel()
	c, err := catalog.Merge("tools.yaml", parse(t, "tools.yaml", goodCatalog),
		[]catalog.TenantCatalog{{Tenant: "acme", ID: 7, Catalog: parse(t, "acme.yaml", acmeFile)}}, []string{"sms.send"})
	require.NoError(t, err)
	require.Equal(t, []string{"acme.close_ticket", "helpdesk.create_ticket", "helpdesk.find_ticket"}, c.Names())
	require.Equal(t, "acme", c.Tools["acme.close_ticket"].Tenant)
	require.Equal(t, int64(7), c.Tools["acme.close_ticket"].TenantID)
	require.Equal(t, "acme", c.Targets["acmedesk"].Tenant)
	require.Empty(t, c.Tools["helpdesk.create_ticket"].Tenant)
	require.Equal(t, "acme", c.TenantOf("acme.close_ticket"))
	rt, err := c.Connect(catalog.Options{})
	require.NoError(t, err)
	byName := map[string]vendorapi.Tool{}
	for _, ot := range rt.Tools(0) {
		byName[ot.Name] = ot
	}
	require.Equal(t, int64(7), byName["acme.close_ticket"].Tenant)
	require.Equal(t, []vendorapi.ObjectArg{{Arg: "ticket_id"}}, byName["acme.close_ticket"].Objects)
	require.Equal(t, "catalog_acmedesk", byName["acme.close_ticket"].Vendor)
	require.Zero(t, byName["helpdesk.create_ticket"].Tenant)
}

// TestMergeRefusesShadowing: a tenant's tool named like the installation's, another
// tenant's or a built-in tool, and a target named like another's, are refused naming
// the tenant's file and the tool or target.
func TestMergeRefusesShadowing(t *testing.T) {
	t.Parallel()
	shadowInstallation := strings.Replace(acmeFile, "acme.close_ticket:", "helpdesk.create_ticket:", 1)
	for name, tc := range map[string]struct {
		tenants  []catalog.TenantCatalog
		reserved []string
		want     string
	}{
		"installation tool": {tenants: []catalog.TenantCatalog{{Tenant: "acme", ID: 1, Catalog: parse(t, "acme.yaml", shadowInstallation)}},
			want: `acme.yaml: tool "helpdesk.create_ticket": the installation's catalog (tools.yaml) has a tool of this name: a tenant's tool may not shadow it`},
		"built-in tool": {tenants: []catalog.TenantCatalog{{Tenant: "acme", ID: 1, Catalog: parse(t, "acme.yaml", acmeFile)}},
			reserved: []string{"acme.close_ticket"},
			want:     `acme.yaml: tool "acme.close_ticket": a built-in tool has a tool of this name`},
		"another tenant's tool": {tenants: []catalog.TenantCatalog{{Tenant: "acme", ID: 1, Catalog: parse(t, "acme.yaml", acmeFile)},
			{Tenant: "beta", ID: 2, Catalog: parse(t, "beta.yaml", strings.Replace(acmeFile, "acmedesk", "betadesk", -1))}},
			want: `beta.yaml: tool "acme.close_ticket": tenant acme's catalog (acme.yaml) has a tool of this name`},
		"installation target": {tenants: []catalog.TenantCatalog{{Tenant: "acme", ID: 1, Catalog: parse(t, "acme.yaml", strings.Replace(acmeFile, "acmedesk", "helpdesk", -1))}},
			want: `acme.yaml: target "helpdesk": the installation's catalog (tools.yaml) has a target or upstream of this name`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := catalog.Merge("tools.yaml", parse(t, "tools.yaml", goodCatalog), tc.tenants, tc.reserved)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
