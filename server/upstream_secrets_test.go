package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/tenant"
)

// echoingUpstream is fakemcp behind a handler that echoes the credentials it receives
// in JSON-RPC errors: to tools/call of send_mail (-32602 when the subject is
// "refuse", else -32000, message and data) and of count_mail (-32000), and, once
// refuseInit is set, to initialize (any other request then answers 500, so that the
// session is opened again).
type echoingUpstream struct {
	fake       http.Handler
	refuseInit atomic.Bool
}

func (e *echoingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				Subject string `json:"subject"`
			} `json:"arguments"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &msg)
	creds := fmt.Sprintf("token %s and key %s", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), r.Header.Get("X-Api-Key"))
	answer := func(code int, text string) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{
			"code": code, "message": text, "data": map[string]any{"seen": r.Header.Get("Authorization"), "key": r.Header.Get("X-Api-Key")}}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}
	switch {
	case e.refuseInit.Load() && msg.Method == "initialize":
		answer(-32001, "unknown "+creds)
	case e.refuseInit.Load():
		http.Error(w, "gone", http.StatusInternalServerError)
	case msg.Method == "tools/call" && msg.Params.Name == "send_mail" && msg.Params.Arguments.Subject == "refuse":
		answer(-32602, "invalid params for "+creds)
	case msg.Method == "tools/call" && (msg.Params.Name == "send_mail" || msg.Params.Name == "count_mail"):
		answer(-32000, "not allowed with "+creds)
	default:
		e.fake.ServeHTTP(w, r)
	}
}

// TestUpstreamSecretsStayOut: an upstream that echoes its credentials (the ${VAR}
// values inside "Bearer ..." and an API key) in JSON-RPC errors, before a session
// opens (initialize) and after (tools/call): neither value appears in /healthz (whose
// error text only an admin sees), in answers to the agent (HTTP problem detail, op,
// MCP tool result), in the stored ops, attempts, events and jobs, or in the log.
func TestUpstreamSecretsStayOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	suffix := fmt.Sprint(time.Now().UnixNano())
	token, apiKey := "tok-"+suffix+"-planted", "key-"+suffix+"-planted"
	tokenVar, keyVar := "ONCEBOX_TEST_UPSTREAM_TOKEN_"+suffix, "ONCEBOX_TEST_UPSTREAM_KEY_"+suffix
	require.NoError(t, os.Setenv(tokenVar, token))
	require.NoError(t, os.Setenv(keyVar, apiKey))
	t.Cleanup(func() { _ = os.Unsetenv(tokenVar); _ = os.Unsetenv(keyVar) })

	up := &echoingUpstream{fake: fakemcp.New().Handler()}
	srv := newUpstreamHTTP(t, up)
	h := hostileOncebox(t, `
upstreams:
  mail:
    url: `+srv.URL+`
    headers: {Authorization: "Bearer ${`+tokenVar+`}", X-Api-Key: "${`+keyVar+`}"}
`, nil)
	admin, err := h.srv.Tenants().NewTokenWithRole(ctx, "acme", tenant.RoleOperator)
	require.NoError(t, err)
	var seen []string // every output, checked at the end

	// After the session opened: a write tool's JSON-RPC errors (unknown, then refused),
	// a read tool's over the API and over MCP.
	status, body := postJSON(t, h.base, h.token, "/v1/ops", "send-echo", `{"tool":"mail.send_mail","args":{"to":"a@example.com","subject":"Hi"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	seen = append(seen, body)
	status, body = postJSON(t, h.base, h.token, "/v1/ops", "send-refuse", `{"tool":"mail.send_mail","args":{"to":"a@example.com","subject":"refuse"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	seen = append(seen, body)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FROM oncebox_op WHERE status IN ('failed', 'unknown', 'needs_review')`).Scan(&n))
		return n == 2
	}, 60*time.Second, 100*time.Millisecond)
	for _, key := range []string{"send-echo", "send-refuse"} {
		got := getAuthed(t, h.base+"/v1/ops/"+key+"?history=true", h.token)
		require.Contains(t, got, "[redacted]", "the echo is kept, its secrets cut out: %s", got)
		seen = append(seen, got)
	}
	status, body = postJSON(t, h.base, h.token, "/v1/ops", "", `{"tool":"mail.count_mail","args":{}}`)
	require.Equal(t, http.StatusBadGateway, status, body)
	require.Contains(t, body, "[redacted]")
	seen = append(seen, body)
	cs := mcpSession(t, h.base, h.token)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mail_count_mail", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	b, _ := json.Marshal(res)
	seen = append(seen, string(b))

	// Before a session opens: the upstream drops the session and refuses initialize,
	// echoing the credentials.
	up.refuseInit.Store(true)
	for range 3 {
		status, body = postJSON(t, h.base, h.token, "/v1/ops", "", `{"tool":"mail.count_mail","args":{}}`)
		require.Equal(t, http.StatusBadGateway, status, body)
		seen = append(seen, body)
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mail_count_mail", Arguments: map[string]any{}})
		require.NoError(t, err)
		b, _ = json.Marshal(res)
		seen = append(seen, string(b))
	}
	require.Eventually(t, func() bool {
		return strings.Contains(getAuthed(t, h.base+"/healthz", admin), "unknown token [redacted] and key [redacted]")
	}, 30*time.Second, 50*time.Millisecond, getAuthed(t, h.base+"/healthz", admin))
	anon := getBody(t, h.base+"/healthz")
	require.NotContains(t, anon, "last_error\"", "an error's text is for an admin: %s", anon)
	require.Contains(t, anon, "last_error_at")
	require.Contains(t, getAuthed(t, h.base+"/healthz", h.token), "last_error_at")
	require.NotContains(t, getAuthed(t, h.base+"/healthz", h.token), "last_error\"", "an agent token is no admin")
	seen = append(seen, anon, getAuthed(t, h.base+"/healthz", admin), getAuthed(t, h.base+"/healthz", h.token), body)
	require.Contains(t, strings.Join(seen, "\n"), "unknown token [redacted]", "the initialize refusal reached the agent, cut")

	seen = append(seen, dumpTables(t, h.pool), h.logs.String())
	all := strings.Join(seen, "\n")
	for _, secret := range []string{token, apiKey, suffix} {
		require.NotContains(t, all, secret)
	}
}
