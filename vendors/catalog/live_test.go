package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/vendors/catalog"
)

// connect parses and connects a catalog held in memory.
func connect(t *testing.T, src string) *catalog.Runtime {
	t.Helper()
	c, err := catalog.Parse("tools.yaml", []byte(src), env)
	require.NoError(t, err)
	rt, err := c.Connect(catalog.Options{})
	require.NoError(t, err)
	return rt
}

// TestLiveSwapRefusesWhatNeedsARestart: a write tool on a target that had no queue at
// start, a changed native_keys and a changed approval rule are refused, naming the
// tool or target and the field, and the catalog in force stays; a changed schema and
// a new tool on a known target swap.
func TestLiveSwapRefusesWhatNeedsARestart(t *testing.T) {
	first := connect(t, goodCatalog)
	live := catalog.NewLive(first)
	require.Len(t, live.Vendors(), 1)

	for _, tc := range []struct{ name, src, tool, field string }{
		{"new target", goodCatalog + `  other.ping:
    description: Ping.
    class: write
    target: other
    path: /ping
    input_schema: {type: object}
`, "other.ping", "target"},
		{"native keys", strings.Replace(goodCatalog, "    lookup_path: /_lookup\n", "    lookup_path: /_lookup\n    native_keys: true\n", 1), "helpdesk", "native_keys"},
		{"approval", strings.Replace(goodCatalog, "    class: write\n", "    class: write\n    approval: {mode: always}\n", 1), "helpdesk.create_ticket", "approval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			if tc.name == "new target" {
				src = strings.Replace(src, "tools:\n", "  other: {base_url: https://other.example.com}\ntools:\n", 1)
			}
			err := live.Swap(connect(t, src))
			var ce *catalog.Error
			require.True(t, errors.As(err, &ce), "%v", err)
			require.Equal(t, tc.tool, ce.Name)
			require.Equal(t, tc.field, ce.Field)
			require.Same(t, first, live.Current())
		})
	}

	next := connect(t, strings.Replace(goodCatalog, "maxLength: 20", "maxLength: 30", 1))
	require.NoError(t, live.Swap(next))
	require.Same(t, next, live.Current())
	require.NotEqual(t, first.Catalog().Tools["helpdesk.create_ticket"].Version, next.Catalog().Tools["helpdesk.create_ticket"].Version,
		"a changed schema is a new version")
}
