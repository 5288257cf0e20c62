package catalog_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/vendors/catalog"
)

// TestIdentityIsCheckedAtLoad: a tool's identity must name distinct properties of its
// input schema; an error names the file, the tool and the field. A good one reaches the
// outbox's tool.
func TestIdentityIsCheckedAtLoad(t *testing.T) {
	t.Parallel()
	with := func(identity string) string {
		return strings.Replace(goodCatalog, "class: write", "class: write\n    identity: "+identity, 1)
	}
	for _, tc := range []struct{ identity, want string }{
		{"[customer_id, order_ref]", `tools.yaml: tool "helpdesk.create_ticket": field identity: "order_ref" is not a property of the tool's input schema`},
		{"[subject, subject]", `tools.yaml: tool "helpdesk.create_ticket": field identity: names "subject" twice`},
		{"[]", `tools.yaml: tool "helpdesk.create_ticket": field identity: names no argument`},
	} {
		_, err := catalog.Parse("tools.yaml", []byte(with(tc.identity)), env)
		require.ErrorContains(t, err, tc.want, tc.identity)
	}
	read := strings.Replace(goodCatalog, "class: read", "class: read\n    identity: [id]", 1)
	_, err := catalog.Parse("tools.yaml", []byte(read), env)
	require.ErrorContains(t, err, `tools.yaml: tool "helpdesk.find_ticket": field class: a read tool makes no op: ttl, dedupe_window, identity`)

	c, err := catalog.Parse("tools.yaml", []byte(with("[customer_id, priority]")), env)
	require.NoError(t, err)
	require.Equal(t, []string{"customer_id", "priority"}, c.Tools["helpdesk.create_ticket"].Identity)
	rt, err := c.Connect(catalog.Options{})
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	for _, ot := range rt.Tools(time.Hour) {
		if ot.Name == "helpdesk.create_ticket" {
			require.Equal(t, []string{"customer_id", "priority"}, ot.Identity)
		}
	}
}

// TestUpstreamIdentityIsCheckedAgainstTheListedSchema: an upstream tool's identity is
// checked when the upstream lists its tools: a field its schema lacks fails the load,
// naming the file, the upstream and the field.
func TestUpstreamIdentityIsCheckedAgainstTheListedSchema(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(fakemcp.New().Handler())
	t.Cleanup(up.Close)
	load := func(identity string) (*catalog.Runtime, error) {
		c, err := catalog.Parse("tools.yaml", []byte(`
upstreams:
  mail:
    url: `+up.URL+`
    tools:
      send_mail: {identity: `+identity+`}
`), nil)
		require.NoError(t, err)
		return c.Connect(catalog.Options{Timeout: 5 * time.Second})
	}
	_, err := load("[to, order_ref]")
	require.ErrorContains(t, err, `tools.yaml: upstream "mail": field tools.send_mail.identity: "order_ref" is not a property of the tool's input schema`)

	rt, err := load("[to, ref]")
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	found := false
	for _, ot := range rt.Tools(time.Hour) {
		if ot.Name == "mail.send_mail" {
			found = true
			require.Equal(t, []string{"to", "ref"}, ot.Identity)
		}
	}
	require.True(t, found)
}
