package sameorigin_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/sameorigin"
)

// TestCheckRedirect: a redirect within the origin is followed; one to another host,
// port or scheme is refused, naming both origins.
func TestCheckRedirect(t *testing.T) {
	t.Parallel()
	req := func(s string) *http.Request {
		u, err := url.Parse(s)
		require.NoError(t, err)
		return &http.Request{URL: u}
	}
	check := sameorigin.CheckRedirect(`upstream "mail"`)
	first := []*http.Request{req("https://mcp.example.com/mcp")}
	require.NoError(t, check(req("https://MCP.example.com:443/other"), first))
	for _, to := range []string{"https://evil.example.com/steal", "https://mcp.example.com:8443/mcp", "http://mcp.example.com/mcp", "https://x.mcp.example.com/mcp"} {
		err := check(req(to), first)
		require.Error(t, err, to)
		require.ErrorContains(t, err, `upstream "mail" redirected to`)
		require.ErrorContains(t, err, "another origin than https://mcp.example.com:443")
	}
	many := make([]*http.Request, 10)
	for i := range many {
		many[i] = first[0]
	}
	require.ErrorContains(t, check(req("https://mcp.example.com/mcp"), many), "stopped after 10 redirects")
}
