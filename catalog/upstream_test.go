package catalog_test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/catalog"
)

// TestClassify: the file's class wins; else readOnlyHint is read, destructiveHint
// unsafe, and anything else, missing annotations included, write, never read.
func TestClassify(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name string
		cfg  *catalog.UpstreamToolConfig
		ann  *mcp.ToolAnnotations
		want string
	}{
		{"no annotations", nil, nil, catalog.ClassWrite},
		{"empty annotations", nil, &mcp.ToolAnnotations{}, catalog.ClassWrite},
		{"read-only", nil, &mcp.ToolAnnotations{ReadOnlyHint: true}, catalog.ClassRead},
		{"destructive", nil, &mcp.ToolAnnotations{DestructiveHint: &yes}, catalog.ClassUnsafe},
		{"not destructive", nil, &mcp.ToolAnnotations{DestructiveHint: &no}, catalog.ClassWrite},
		{"file says write over read-only", &catalog.UpstreamToolConfig{Class: catalog.ClassWrite}, &mcp.ToolAnnotations{ReadOnlyHint: true}, catalog.ClassWrite},
		{"file says unsafe", &catalog.UpstreamToolConfig{Class: catalog.ClassUnsafe}, nil, catalog.ClassUnsafe},
		{"file without class", &catalog.UpstreamToolConfig{}, &mcp.ToolAnnotations{ReadOnlyHint: true}, catalog.ClassRead},
	} {
		require.Equal(t, c.want, catalog.Classify(c.cfg, c.ann), c.name)
	}
}

// TestBrokenUpstreamNamesUpstreamAndField: upstream mistakes refuse to load, naming
// the upstream and the field.
func TestBrokenUpstreamNamesUpstreamAndField(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"upstreams: {mail: {}}", `upstream "mail": field url: set either url`},
		{"upstreams: {mail: {url: ftp://x}}", `upstream "mail": field url: must be an absolute http or https URL`},
		{`upstreams: {mail: {url: "http://x", headers: {Authorization: "Bearer ${NOPE_UNSET}"}}}`, `field headers: header Authorization: the environment variable NOPE_UNSET is not set`},
		{"upstreams: {mail: {command: x, headers: {A: b}}}", `field headers: headers are for an HTTP upstream`},
		{"upstreams: {mail: {command: x, tools: {send: {class: maybe}}}}", `field tools.send.class: "maybe" is not read, write or unsafe`},
		{"upstreams: {mail: {command: x, tools: {send: {lookup_tool: find}}}}", `field tools.send.lookup_tool: set both`},
		{"upstreams: {mail: {command: x, tools: {find: {class: read, tag_argument: ref}}}}", `field tools.find.class: a read tool makes no op`},
	} {
		_, err := catalog.Parse("tools.yaml", []byte(c.yaml), func(string) string { return "" })
		require.ErrorContains(t, err, c.want, c.yaml)
	}
}
