package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/oauthas"
)

// TestOAuthResourceServer (issue 45, item 1): with --oauth-issuer, oncebox serves
// its protected resource metadata (RFC 9728) naming the authorization server; a 401
// of /mcp and of the API names it in WWW-Authenticate; an MCP client holding an
// access token the running authorization server issued for this resource calls a
// tool (one PaymentIntent at the fake Stripe) and so does an API client; a token for
// another audience, an expired one and one whose tenant claim names no tenant are
// refused with 401 and their reason, an approver's token at /mcp with 403; oncebox's
// own token keeps working beside them. No answer is a 5xx.
func TestOAuthResourceServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	as := oauthas.Start()
	t.Cleanup(as.Close)
	fake := fakestripe.New(fakestripe.Config{})
	stripe := httptest.NewServer(fake)
	t.Cleanup(stripe.Close)
	const resource = "https://oncebox.example.com"
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_oauth", stripe.URL
	cfg.OAuthIssuer, cfg.OAuthAudience = as.Issuer(), resource
	_, base := runServer(t, ctx, cfg)
	_, own, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	as.AddClient("agent", oauthas.Client{Secret: "s", Subject: "agent-7", Tenant: "acme"})
	as.AddClient("ghost", oauthas.Client{Secret: "s", Subject: "ghost", Tenant: "nosuch"})

	get := func(path, token string) (int, http.Header, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	status, _, body := get("/.well-known/oauth-protected-resource", "")
	require.Equal(t, http.StatusOK, status, body)
	var meta map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &meta))
	require.Equal(t, resource, meta["resource"])
	require.Equal(t, []any{as.Issuer()}, meta["authorization_servers"])
	require.Contains(t, meta["scopes_supported"], "oncebox:agent")

	challenge := `resource_metadata="` + resource + `/.well-known/oauth-protected-resource"`
	status, h, _ := get("/v1/ops/x", "")
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, h.Get("WWW-Authenticate"), challenge)
	mcpStatus, mh := postMCP(t, base, "")
	require.Equal(t, http.StatusUnauthorized, mcpStatus)
	require.Contains(t, mh.Get("WWW-Authenticate"), challenge)
	require.Contains(t, mh.Get("WWW-Authenticate"), `scope="oncebox:agent"`)

	agent, err := as.Token("agent", resource, "oncebox:agent")
	require.NoError(t, err)
	status, _, body = get("/v1/ops/none", agent)
	require.Equal(t, http.StatusNotFound, status, "an access token of the tenant reads its ops: %s", body)
	status, _, _ = get("/v1/ops/none", own)
	require.Equal(t, http.StatusNotFound, status, "oncebox's own token still works")

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token: agent}}, MaxRetries: -1}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stripe_payment_intent",
		Arguments: map[string]any{"amount": 1200, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	require.Len(t, fake.PaymentIntents(), 1)

	other, err := as.Token("agent", "https://other.example.com", "oncebox:agent")
	require.NoError(t, err)
	ghost, err := as.Token("ghost", resource, "oncebox:agent")
	require.NoError(t, err)
	expired := as.Mint(map[string]any{"sub": "agent-7", "aud": resource, "scope": "oncebox:agent", "oncebox_tenant": "acme", "exp": 1}, 0)
	approver := as.Mint(map[string]any{"sub": "alice", "aud": resource, "scope": "oncebox:approver", "oncebox_tenant": "acme"}, time.Hour)
	for token, reason := range map[string]string{other: "not for this resource", ghost: "which is no tenant of this oncebox", expired: "expired at"} {
		status, h, body := get("/v1/ops/none", token)
		require.Equal(t, http.StatusUnauthorized, status, body)
		require.Contains(t, body, reason)
		require.Contains(t, h.Get("WWW-Authenticate"), challenge)
		status, _ = postMCP(t, base, token)
		require.Equal(t, http.StatusUnauthorized, status, reason)
	}
	status, _ = postMCP(t, base, approver)
	require.Equal(t, http.StatusForbidden, status, "an approver's token does not use MCP")
}

// postMCP posts an initialize to /mcp with the token, and returns the status and headers.
func postMCP(t *testing.T, base, token string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}
