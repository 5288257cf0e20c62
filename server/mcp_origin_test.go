package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// TestMCPRefusesForeignOrigins (issue 42, item 4): a request to /mcp whose Origin is
// another site's is refused with 403 cross-origin before its token is read; the
// public URL's origin, a configured origin, a loopback origin and no Origin at all are
// served.
func TestMCPRefusesForeignOrigins(t *testing.T) {
	t.Parallel()
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.WebhookTargets = map[string]webhook.Target{"hooks": {BaseURL: "http://127.0.0.1:9"}}
	cfg.PublicURL = "https://oncebox.example.com"
	cfg.MCPAllowedOrigins = []string{"https://agents.example.com"}
	_, base := runServer(t, context.Background(), cfg)
	_, token, err := tenant.NewStore(pool).Create(context.Background(), "acme")
	require.NoError(t, err)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(origin string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(initialize))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, origin := range []string{"http://evil.example.com", "https://oncebox.example.com.evil.example", "null", "https://agents.example.com:8443"} {
		status, body := post(origin)
		require.Equal(t, http.StatusForbidden, status, "Origin %s: %s", origin, body)
		var p map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &p), body)
		require.Equal(t, "https://oncebox.dev/problems/cross-origin", p["type"])
		require.Contains(t, p["detail"], "may not call /mcp")
	}
	for _, origin := range []string{"", "https://oncebox.example.com", "https://ONCEBOX.example.com:443", "https://agents.example.com", "http://localhost:5173", "http://127.0.0.1:3000"} {
		status, body := post(origin)
		require.Equal(t, http.StatusOK, status, "Origin %q: %s", origin, body)
	}
}
