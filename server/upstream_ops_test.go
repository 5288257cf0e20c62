package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// getBody GETs url with no token and returns its body, requiring a 200.
func getBody(t *testing.T, url string) string {
	t.Helper()
	return getAuthed(t, url, "")
}

// watchToolList opens an MCP session on base's /mcp with token, closed at the end of
// the test. changed receives each notifications/tools/list_changed; tools lists the
// session's tools by name.
func watchToolList(ctx context.Context, t *testing.T, base, token string) (changed <-chan struct{}, tools func() map[string]*mcp.Tool) {
	t.Helper()
	ch := make(chan struct{}, 8)
	transport := &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: token}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} },
	}).Connect(ctx, transport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return ch, func() map[string]*mcp.Tool {
		list, err := cs.ListTools(ctx, nil)
		require.NoError(t, err)
		out := map[string]*mcp.Tool{}
		for _, tool := range list.Tools {
			out[tool.Name] = tool
		}
		return out
	}
}

// TestUpstreamRateLimitSnoozesWithoutAttempts: an upstream limited to 2 calls a second
// (burst 1) gets 4 ops at once; they are sent no faster than the limit, each in one
// attempt (an op held by the limit is snoozed before it is claimed: no attempt, no
// failure, nothing sent), all succeed, and the waits are counted in the metrics.
func TestUpstreamRateLimitSnoozesWithoutAttempts(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	base, _, srv, pool := upstreamOncebox(t, fake, func(url string) string {
		return `
upstreams:
  mail:
    url: ` + url + `
    workers: 4
    rate: {per_second: 2, burst: 1}
    tools:
      send_mail: {tag_argument: ref, lookup_tool: find_mail, lookup_argument: ref}
`
	}, nil)
	ctx := context.Background()
	tn, err := tenant.NewStore(pool).ByName(ctx, "acme")
	require.NoError(t, err)
	start := time.Now()
	for i := range 4 {
		_, err := srv.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: fmt.Sprintf("rl-%d", i), Tool: "mail.send_mail",
			Args: json.RawMessage(fmt.Sprintf(`{"to":"r%d@example.com","subject":"Hi"}`, i))})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op WHERE status = 'succeeded'").Scan(&n)
		return err == nil && n == 4
	}, 60*time.Second, 100*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), 1400*time.Millisecond, "4 calls at 2 a second, burst 1: at least 1.5 s")
	require.Len(t, fake.Mails(), 4)
	require.Equal(t, 4, fake.Calls())
	var maxAttempts int
	require.NoError(t, pool.QueryRow(ctx, "SELECT max(attempts) FROM oncebox_op").Scan(&maxAttempts))
	require.Equal(t, 1, maxAttempts, "waiting for the rate limit is not an attempt")
	metrics := getBody(t, base+"/metrics")
	require.Regexp(t, `oncebox_upstream_rate_limited_total\{upstream="mail"\} [1-9]`, metrics)
	require.Contains(t, metrics, `oncebox_upstream_calls_total{kind="dispatch",outcome="result",upstream="mail"} 4`)
	require.Contains(t, metrics, `oncebox_upstream_connected{upstream="mail"} 1`)
}

// TestUpstreamStdioProgramRestarted: a stdio upstream's program crashes after acting.
// Without waiting for another call, oncebox starts it again (with backoff), counts the
// restart in /healthz and the metrics, and logs the program's stderr under the
// upstream's name; the op, with no lookup tool, is held for review, sent once.
func TestUpstreamStdioProgramRestarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &syncBuffer{}
	srv, base, pool, state := stdioOncebox(t, `send_mail: {tag_argument: ref}`, slog.New(slog.NewJSONHandler(logs, nil)))
	tn, err := tenant.NewStore(pool).ByName(ctx, "acme")
	require.NoError(t, err)

	admin, err := srv.Tenants().NewTokenWithRole(ctx, "acme", tenant.RoleOperator)
	require.NoError(t, err)
	healthAs := func(token string) map[string]any {
		var h struct {
			OK        bool                      `json:"ok"`
			Upstreams map[string]map[string]any `json:"upstreams"`
		}
		require.NoError(t, json.Unmarshal([]byte(getAuthed(t, base+"/healthz", token)), &h))
		require.True(t, h.OK)
		return h.Upstreams["box"]
	}
	health := func() map[string]any { return healthAs(admin) }
	h := health()
	require.Equal(t, "stdio", h["transport"])
	require.Equal(t, true, h["connected"])
	require.EqualValues(t, 0, h["restarts"])

	require.NoError(t, fakemcp.WriteCrashNext(state, 1))
	_, err = srv.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "crash-restart", Tool: "box.send_mail",
		Args: json.RawMessage(`{"to":"cy@example.com","subject":"Hi"}`)})
	require.NoError(t, err)
	waitStatus(t, pool, "box.send_mail", "needs_review")
	require.Eventually(t, func() bool {
		h = health()
		return h["connected"] == true && h["restarts"] == float64(1)
	}, 30*time.Second, 100*time.Millisecond, "health: %v", h)
	require.Contains(t, h["last_error"], "session ended")
	anon := healthAs("")
	require.NotContains(t, anon, "last_error", "the error text is for an admin")
	require.Contains(t, anon, "last_error_at")

	st, err := fakemcp.ReadState(state)
	require.NoError(t, err)
	require.Len(t, st.Mails, 1, "sent once")
	metrics := getBody(t, base+"/metrics")
	require.Contains(t, metrics, `oncebox_upstream_restarts_total{upstream="box"} 1`)
	require.Contains(t, metrics, `oncebox_upstream_connected{upstream="box"} 1`)
	require.Contains(t, metrics, `oncebox_upstream_calls_total{kind="dispatch",outcome="lost",upstream="box"} 1`)

	var stderr []string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"upstream stderr"`) && strings.Contains(line, `"upstream":"box"`) {
			stderr = append(stderr, line)
		}
	}
	joined := strings.Join(stderr, "\n")
	require.Contains(t, joined, "fakemcp: crashing after acting", "the program's stderr, logged with the upstream's name")
	require.Equal(t, 2, strings.Count(joined, "fakemcp: serving over stdio"), "started, then started again")
}

// TestUpstreamToolsListChanged: an upstream adds a tool while oncebox runs and
// announces it (notifications/tools/list_changed); oncebox lists its tools again and
// offers the new one over MCP, whose clients are told their list changed, and GET
// /v1/tools, and an op of it is sent.
func TestUpstreamToolsListChanged(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	base, token, _, pool := upstreamOncebox(t, fake, func(url string) string { return upstreamCatalog(url, true) }, nil)
	ctx := context.Background()
	changed, mcpTools := watchToolList(ctx, t, base, token)
	require.NotContains(t, mcpTools(), "mail_send_sms")

	fake.AddTool("send_sms", "Send a text message.")
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the MCP client was not told its tool list changed")
	}
	require.Contains(t, mcpTools(), "mail_send_sms")
	require.True(t, strings.HasPrefix(mcpTools()["mail_send_sms"].Description, "Send a text message."))
	require.Contains(t, getAuthed(t, base+"/v1/tools", token), `"mail.send_sms"`)

	status, body := postJSON(t, base, token, "/v1/ops?wait=20s", "sms-1", `{"tool":"mail.send_sms","args":{"to":"+1555"}}`)
	require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, status, body)
	waitStatus(t, pool, "mail.send_sms", "succeeded")
	var result string
	require.NoError(t, pool.QueryRow(ctx, "SELECT result::text FROM oncebox_op WHERE tool = 'mail.send_sms'").Scan(&result))
	require.Contains(t, result, `+1555`)
}

// TestUpstreamOpKeepsItsToolDefinition: an unsafe upstream op accepted while the file
// names ref as its tag argument waits for approval; the file is reloaded without it;
// once approved the op is sent as it was accepted, the op id in ref.
func TestUpstreamOpKeepsItsToolDefinition(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	file := func(url, tag string) string {
		return `
upstreams:
  mail:
    url: ` + url + `
    tools:
      send_mail: {class: unsafe` + tag + `}
`
	}
	var toolsFile, upURL string
	base, token, srv, pool := upstreamOncebox(t, fake, func(url string) string { upURL = url; return file(url, ", tag_argument: ref") },
		func(cfg *server.Config) { toolsFile = cfg.ToolsFile })
	ctx := context.Background()
	approver, err := tenant.NewStore(pool).NewTokenWithRole(ctx, "acme", tenant.RoleApprover)
	require.NoError(t, err)
	status, body := postJSON(t, base, token, "/v1/ops", "pinned-1", `{"tool":"mail.send_mail","args":{"to":"ann@example.com","subject":"Hi"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	require.Contains(t, body, `"status":"awaiting_approval"`)
	var def string
	require.NoError(t, pool.QueryRow(ctx, "SELECT tool_definition::text FROM oncebox_op").Scan(&def))
	require.Contains(t, def, `"upstream_tool": "send_mail"`)
	require.Contains(t, def, `"tag_argument": "ref"`)

	require.NoError(t, os.WriteFile(toolsFile, []byte(file(upURL, "")), 0o600))
	require.NoError(t, srv.ReloadCatalog(ctx))

	status, body = postJSON(t, base, approver, "/v1/ops/pinned-1/approve", "", `{}`)
	require.Equal(t, http.StatusOK, status, body)
	waitStatus(t, pool, "mail.send_mail", "succeeded")
	var opID string
	require.NoError(t, pool.QueryRow(ctx, "SELECT id::text FROM oncebox_op").Scan(&opID))
	mails := fake.Mails()
	require.Len(t, mails, 1)
	require.Equal(t, opID, mails[0].Ref, "sent with the tag argument it was accepted with")
}

// getAuthed GETs url with token (none when empty) and returns its body, requiring a 200.
func getAuthed(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return string(b)
}

// TestUpstreamResultStoredByteForByte: the upstream answers with a CallToolResult
// whose structuredContent keys are not in sorted order and which carries fields the
// protocol does not define; the op's stored result is those bytes exactly (the SDK's
// decoding encoded again would sort the keys and drop the fields), GET /v1/ops returns
// them, and an MCP repeat is answered from them.
func TestUpstreamResultStoredByteForByte(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	base, token, _, pool := upstreamOncebox(t, fake, func(url string) string { return upstreamCatalog(url, true) }, nil)
	const raw = `{"structuredContent":{"zeta":1,"alpha":{"y":true,"b":null},"id":"mail_x"},` +
		`"content":[{"type":"text","text":"sent","x-extra":1}],"x-vendor":{"kept":"yes"}}`
	fake.RawResultNext(raw)
	ctx := context.Background()
	cs := mcpSession(t, base, token)
	call := func() *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mail_send_mail", Arguments: map[string]any{"to": "ann@example.com", "subject": "Hi"}})
		require.NoError(t, err)
		return res
	}
	call()
	waitStatus(t, pool, "mail.send_mail", "succeeded")
	var stored, key string
	require.NoError(t, pool.QueryRow(ctx, "SELECT result::text, idempotency_key FROM oncebox_op").Scan(&stored, &key))
	require.Equal(t, raw, stored, "the upstream's bytes, not a re-encoding")
	require.Contains(t, getAuthed(t, base+"/v1/ops/"+url.PathEscape(key), token), `"result":`+raw)

	res := call()
	require.Equal(t, true, res.Meta["oncebox/replayed"])
	require.Equal(t, map[string]any{"zeta": 1.0, "alpha": map[string]any{"y": true, "b": nil}, "id": "mail_x"}, res.StructuredContent)
	require.Equal(t, "sent", res.Content[0].(*mcp.TextContent).Text)
	require.Len(t, fake.Mails(), 1)
}

// TestUpstreamRedactHidesFields: the file redacts send_mail's "to" argument and the
// address in its result; the upstream gets the address, the stored op keeps a hash in
// its place, and an MCP repeat is answered from the redacted result.
func TestUpstreamRedactHidesFields(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	base, token, _, pool := upstreamOncebox(t, fake, func(url string) string {
		return `
upstreams:
  mail:
    url: ` + url + `
    tools:
      send_mail:
        dedupe_window: 1h
        redact: {args: [to], result: [structuredContent.to, content.text]}
`
	}, func(cfg *server.Config) { cfg.SealKey = testSealKey() })
	ctx := context.Background()
	cs := mcpSession(t, base, token)
	call := func() *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mail_send_mail", Arguments: map[string]any{"to": "ann@example.com", "subject": "Hi"}})
		require.NoError(t, err)
		return res
	}
	call()
	waitStatus(t, pool, "mail.send_mail", "succeeded")
	require.Equal(t, "ann@example.com", fake.Mails()[0].To, "the upstream got the address")
	var args, result string
	require.NoError(t, pool.QueryRow(ctx, "SELECT args::text, result::text FROM oncebox_op").Scan(&args, &result))
	for _, stored := range []string{args, result} {
		require.NotContains(t, stored, "ann@example.com")
		require.Contains(t, stored, `"[redacted hmac-sha256:`)
	}
	require.Contains(t, args, `"subject": "Hi"`, "the rest stays")
	require.Contains(t, result, `"subject":"Hi"`)

	res := call()
	require.Equal(t, true, res.Meta["oncebox/replayed"])
	sc, _ := json.Marshal(res.StructuredContent)
	require.NotContains(t, string(sc), "ann@example.com")
	require.Contains(t, string(sc), `"subject":"Hi"`)
	require.Len(t, fake.Mails(), 1)
}

// stdioOncebox runs a whole server in front of the fakemcp command over stdio (upstream
// "box", its tools: entry tools), with tenant acme; it returns the fake's state file.
func stdioOncebox(t *testing.T, tools string, logger *slog.Logger) (srv *server.Server, base string, pool *pgxpool.Pool, state string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakemcp")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/oncebox/oncebox/devkit/fakemcp/cmd/fakemcp").CombinedOutput()
	require.NoError(t, err, "%s", out)
	state = filepath.Join(dir, "state.json")
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ReconcileInterval = time.Second
	cfg.WebhookTimeout = 3 * time.Second
	cfg.ToolsFile = writeCatalog(t, `
upstreams:
  box:
    command: `+bin+`
    args: [-state, `+state+`]
    tools:
      `+tools+`
`)
	srv, err = server.New(ctx, cfg, logger)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, _, err = tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	return srv, "http://" + addr.String(), pool, state
}

// TestUpstreamStdioResultStoredByteForByte: as TestUpstreamResultStoredByteForByte,
// over stdio: the stored result is the line the program wrote, byte for byte.
func TestUpstreamStdioResultStoredByteForByte(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, _, pool, state := stdioOncebox(t, `send_mail: {tag_argument: ref}`, nil)
	tn, err := tenant.NewStore(pool).ByName(ctx, "acme")
	require.NoError(t, err)
	const raw = `{"structuredContent":{"zeta":1,"id":"mail_1","alpha":[3,2,1]},"content":[{"type":"text","text":"sent","x-extra":1}],"x-vendor":"kept"}`
	require.NoError(t, fakemcp.WriteRawNext(state, raw))
	_, err = srv.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "raw-stdio", Tool: "box.send_mail",
		Args: json.RawMessage(`{"to":"cy@example.com","subject":"Hi"}`)})
	require.NoError(t, err)
	waitStatus(t, pool, "box.send_mail", "succeeded")
	var stored string
	require.NoError(t, pool.QueryRow(ctx, "SELECT result::text FROM oncebox_op").Scan(&stored))
	require.Equal(t, raw, stored)
}
