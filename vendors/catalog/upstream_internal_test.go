package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUpstreamVarsAreTheExpandedValues: the values of the ${VAR}s expanded in an
// upstream's headers are kept, with the expanded headers, for the session to cut out
// of its errors and results (mcpupstream's TestScrubCutsEverySecret).
func TestUpstreamVarsAreTheExpandedValues(t *testing.T) {
	t.Parallel()
	c, err := Parse("tools.yaml", []byte(`
upstreams:
  mail:
    url: http://x
    headers: {Authorization: "Bearer ${T}", X-Key: "pre-${K}-post", X-Literal: "Token literal-cred-99"}
`), func(k string) string { return map[string]string{"T": "tok\"quoted1", "K": "kkkk1234"}[k] })
	require.NoError(t, err)
	up := c.Upstreams["mail"]
	require.ElementsMatch(t, []string{"tok\"quoted1", "kkkk1234"}, up.vars)
	require.Equal(t, map[string]string{"Authorization": "Bearer tok\"quoted1", "X-Key": "pre-kkkk1234-post", "X-Literal": "Token literal-cred-99"}, up.Headers)
}
