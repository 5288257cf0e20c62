package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/client"
	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
)

// upstreamCatalog puts oncebox in front of the fake MCP server at url. With lookup,
// send_mail is reconciled through find_mail by its ref; count_mail, read-only
// upstream, is made a write tool by the file.
func upstreamCatalog(url string, lookup bool) string {
	send := `
      send_mail:
        tag_argument: ref
        dedupe_window: 1h`
	if lookup {
		send += `
        lookup_tool: find_mail
        lookup_argument: ref`
	}
	return `
upstreams:
  mail:
    url: ` + url + `
    headers: {X-Test: "fixed"}
    tools:` + send + `
      count_mail:
        class: write
`
}

// upstreamServer runs a whole server in front of a fake MCP server.
func upstreamServer(t *testing.T, lookup bool) (base, token string, fake *fakemcp.Server, pool *pgxpool.Pool) {
	t.Helper()
	return upstreamServerWith(t, fakemcp.New(), func(url string) string { return upstreamCatalog(url, lookup) })
}

// upstreamServerWith runs a whole server in front of fake, served over streamable HTTP,
// with the catalog file catalogFor(the fake's URL).
func upstreamServerWith(t *testing.T, fake *fakemcp.Server, catalogFor func(url string) string) (base, token string, _ *fakemcp.Server, pool *pgxpool.Pool) {
	t.Helper()
	base, token, _, pool = upstreamOncebox(t, fake, catalogFor, nil)
	return base, token, fake, pool
}

// upstreamOncebox runs a whole server in front of fake over streamable HTTP, with the
// catalog file catalogFor(url) and cfg adjusted by tune (when not nil).
func upstreamOncebox(t *testing.T, fake *fakemcp.Server, catalogFor func(url string) string, tune func(*server.Config)) (base, token string, srv *server.Server, pool *pgxpool.Pool) {
	t.Helper()
	return upstreamOnceboxLogged(t, fake, catalogFor, tune, nil)
}

// upstreamOnceboxLogged is upstreamOncebox logging to logger (nil: nowhere).
func upstreamOnceboxLogged(t *testing.T, fake *fakemcp.Server, catalogFor func(url string) string, tune func(*server.Config), logger *slog.Logger) (base, token string, srv *server.Server, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	up := httptest.NewServer(fake.Handler())
	t.Cleanup(up.Close)
	t.Cleanup(fake.Release) // before up.Close: a held call must end for it to return
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ReconcileInterval = time.Second
	cfg.WebhookTimeout = 3 * time.Second
	cfg.ToolsFile = writeCatalog(t, catalogFor(up.URL))
	if tune != nil {
		tune(&cfg)
	}
	srv, err := server.New(ctx, cfg, logger)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, token, err = tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	return "http://" + addr.String(), token, srv, pool
}

func mcpSession(t *testing.T, base, token string) *mcp.ClientSession {
	t.Helper()
	transport := &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: token}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), transport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// waitStatus waits for the only op of tool to reach status.
func waitStatus(t *testing.T, pool *pgxpool.Pool, tool, status string) {
	t.Helper()
	var got string
	require.Eventually(t, func() bool {
		err := pool.QueryRow(context.Background(), "SELECT status FROM oncebox_op WHERE tool = $1", tool).Scan(&got)
		return err == nil && got == status
	}, 90*time.Second, 200*time.Millisecond, "op of %s: %s, want %s", tool, got, status)
}

// TestUpstreamToolsClassified: the upstream's tools are offered as <upstream>_<tool>
// with its schema and description, classified by annotations unless the file says
// otherwise.
func TestUpstreamToolsClassified(t *testing.T) {
	t.Parallel()
	base, token, _, _ := upstreamServer(t, true)
	list, err := mcpSession(t, base, token).ListTools(context.Background(), nil)
	require.NoError(t, err)
	byName := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		byName[tool.Name] = tool
	}
	send := byName["mail_send_mail"]
	require.NotNil(t, send, "tools: %v", byName)
	require.True(t, strings.HasPrefix(send.Description, "Send a mail."), send.Description)
	require.False(t, send.Annotations.ReadOnlyHint, "no annotations: write")
	require.False(t, *send.Annotations.DestructiveHint)
	schema, _ := json.Marshal(send.InputSchema)
	require.Contains(t, string(schema), `"subject"`, "the upstream's schema")

	require.True(t, byName["mail_find_mail"].Annotations.ReadOnlyHint, "readOnlyHint: read")
	require.True(t, *byName["mail_purge_mail"].Annotations.DestructiveHint, "destructiveHint: unsafe")
	require.False(t, byName["mail_count_mail"].Annotations.ReadOnlyHint, "read-only upstream, write in the file: the file wins")

	c, err := client.New(client.Config{BaseURL: base, Token: token})
	require.NoError(t, err)
	tools, err := c.Tools(context.Background())
	require.NoError(t, err)
	classes := map[string]string{}
	for _, tool := range tools {
		classes[tool.Name] = tool.Class
	}
	require.Equal(t, map[string]string{"mail.send_mail": "write", "mail.find_mail": "read", "mail.purge_mail": "unsafe", "mail.count_mail": "write"}, classes)
}

// TestUpstreamReadToolForwardedWithNoOp: a read tool is called upstream at once and
// makes no op.
func TestUpstreamReadToolForwardedWithNoOp(t *testing.T) {
	t.Parallel()
	base, token, fake, pool := upstreamServer(t, true)
	res, err := mcpSession(t, base, token).CallTool(context.Background(), &mcp.CallToolParams{Name: "mail_find_mail", Arguments: map[string]any{"ref": "none"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	require.Equal(t, map[string]any{"objects": []any{}}, res.StructuredContent, "the upstream's own answer")
	require.Zero(t, fake.Calls())
	var ops int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM oncebox_op").Scan(&ops))
	require.Zero(t, ops)
}

// TestUpstreamWriteToolTwoSessionsOneSideEffect: two MCP sessions call the same
// upstream write tool with the same arguments: one op, one mail, sent with the op's id
// in _meta and in the tag argument.
func TestUpstreamWriteToolTwoSessionsOneSideEffect(t *testing.T) {
	t.Parallel()
	base, token, fake, pool := upstreamServer(t, true)
	a, b := mcpSession(t, base, token), mcpSession(t, base, token)
	var wg sync.WaitGroup
	for _, cs := range []*mcp.ClientSession{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mail_send_mail",
				Arguments: map[string]any{"to": "ann@example.com", "subject": "Hi"}})
			if err == nil {
				require.False(t, res.IsError, "%+v", res.Content)
			}
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	waitStatus(t, pool, "mail.send_mail", "succeeded")
	mails := fake.Mails()
	require.Len(t, mails, 1)
	var opID, key, result, ref string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT id::text, vendor_key, result::text, coalesce(vendor_ref, '') FROM oncebox_op").
		Scan(&opID, &key, &result, &ref))
	require.Equal(t, mails[0].ID, ref, "the vendor reference is the id the result names")
	require.Equal(t, opID, mails[0].Ref, "the op id in the tag argument")
	require.Equal(t, opID, mails[0].Meta["oncebox/op_id"])
	require.Equal(t, key, mails[0].Meta["oncebox/idempotency_key"])
	require.Contains(t, result, `"structuredContent"`, "the CallToolResult is the op's result")
	require.Contains(t, result, mails[0].ID)

	// The same call again is the same op, answered with the upstream's CallToolResult.
	res, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "mail_send_mail",
		Arguments: map[string]any{"to": "ann@example.com", "subject": "Hi"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, mails[0].ID, res.StructuredContent.(map[string]any)["id"], "the upstream's answer, replayed")
	require.Equal(t, opID, res.Meta["oncebox/op_id"])
	require.Equal(t, true, res.Meta["oncebox/replayed"])
	require.Len(t, fake.Mails(), 1)
}

// TestUpstreamDropAfterActingIsFoundByLookup: the answer is lost after the upstream
// acted; the op is unknown, the lookup tool finds the mail, the op succeeds, and
// nothing is sent twice.
func TestUpstreamDropAfterActingIsFoundByLookup(t *testing.T) {
	t.Parallel()
	base, token, fake, pool := upstreamServer(t, true)
	fake.DropAfterActing(1)
	c, err := client.New(client.Config{BaseURL: base, Token: token})
	require.NoError(t, err)
	_, err = c.Enqueue(context.Background(), "drop-1", "mail.send_mail", json.RawMessage(`{"to":"bob@example.com","subject":"Hi"}`), nil)
	require.NoError(t, err)
	waitStatus(t, pool, "mail.send_mail", "succeeded")
	require.Equal(t, 1, fake.Calls(), "no second call")
	require.Len(t, fake.Mails(), 1)
	var ref, result string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT coalesce(vendor_ref, ''), result::text FROM oncebox_op").Scan(&ref, &result))
	require.Equal(t, fake.Mails()[0].ID, ref, "the vendor reference is the id of the object the lookup found")
	var res struct {
		StructuredContent map[string]any `json:"structuredContent"`
		Content           []struct{ Type, Text string }
	}
	require.NoError(t, json.Unmarshal([]byte(result), &res), result)
	require.Equal(t, fake.Mails()[0].ID, res.StructuredContent["id"], "a CallToolResult, as a dispatched op's result: %s", result)
	require.Len(t, res.Content, 1)
	require.Equal(t, "text", res.Content[0].Type)
}

// TestUpstreamUnknownWithoutLookupNeedsReview: without a lookup tool, a lost answer
// goes to needs_review, never resent.
func TestUpstreamUnknownWithoutLookupNeedsReview(t *testing.T) {
	t.Parallel()
	base, token, fake, pool := upstreamServer(t, false)
	fake.DropAfterActing(1)
	c, err := client.New(client.Config{BaseURL: base, Token: token})
	require.NoError(t, err)
	_, err = c.Enqueue(context.Background(), "drop-2", "mail.send_mail", json.RawMessage(`{"to":"bob@example.com","subject":"Hi"}`), nil)
	require.NoError(t, err)
	waitStatus(t, pool, "mail.send_mail", "needs_review")
	require.Equal(t, 1, fake.Calls())
}

// TestUpstreamIsErrorFails: an isError answer fails the op, is stored, and is what a
// repeated call gets back.
func TestUpstreamIsErrorFails(t *testing.T) {
	t.Parallel()
	base, token, fake, pool := upstreamServer(t, true)
	fake.FailNext(1)
	cs := mcpSession(t, base, token)
	call := func() *mcp.CallToolResult {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mail_send_mail",
			Arguments: map[string]any{"to": "bob@example.com", "subject": "Hi"}})
		require.NoError(t, err)
		return res
	}
	call()
	waitStatus(t, pool, "mail.send_mail", "failed")
	res := call() // replayed
	require.True(t, res.IsError)
	require.Equal(t, "mailbox full", res.Content[0].(*mcp.TextContent).Text, "the upstream's isError answer, replayed")
	require.Equal(t, "failed", res.Meta["oncebox/status"])
	require.Equal(t, 1, fake.Calls())
	require.Empty(t, fake.Mails())
}

// TestUpstreamStdioCrashAfterActing: a stdio upstream acts, then its process dies
// before answering; the op is unknown, the lookup tool (in a new process) finds the
// mail, the op succeeds, and the upstream holds one mail.
func TestUpstreamStdioCrashAfterActing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakemcp")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/oncebox/oncebox/devkit/fakemcp/cmd/fakemcp").CombinedOutput()
	require.NoError(t, err, "%s", out)
	state := filepath.Join(dir, "state.json")
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
      send_mail: {tag_argument: ref, lookup_tool: find_mail, lookup_argument: ref}
`)
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	_, err = srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	require.NoError(t, fakemcp.WriteCrashNext(state, 1))
	_, err = srv.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "crash-1", Tool: "box.send_mail",
		Args: json.RawMessage(`{"to":"cy@example.com","subject":"Hi"}`)})
	require.NoError(t, err)
	waitStatus(t, pool, "box.send_mail", "succeeded")
	st, err := fakemcp.ReadState(state)
	require.NoError(t, err)
	require.Len(t, st.Mails, 1, "one side effect")
	require.Zero(t, st.CrashNext, "the process crashed after acting")
}

// TestUpstreamHangAfterActingIsFoundByLookup: the upstream acts and never answers;
// the call times out, the op is unknown, the lookup tool finds the mail, and nothing
// is sent twice.
func TestUpstreamHangAfterActingIsFoundByLookup(t *testing.T) {
	t.Parallel()
	base, token, fake, pool := upstreamServer(t, true)
	fake.HangAfterActing(1)
	c, err := client.New(client.Config{BaseURL: base, Token: token})
	require.NoError(t, err)
	_, err = c.Enqueue(context.Background(), "hang-1", "mail.send_mail", json.RawMessage(`{"to":"dee@example.com","subject":"Hi"}`), nil)
	require.NoError(t, err)
	waitStatus(t, pool, "mail.send_mail", "succeeded")
	require.Equal(t, 1, fake.Calls(), "no second call")
	require.Len(t, fake.Mails(), 1)
}

// TestUpstreamTagArgumentIsOnceboxs: the tag argument is in neither the MCP tools/list
// schema nor GET /v1/tools; a caller who sends it is refused, over HTTP with 400
// invalid-args naming the field and the rule, over MCP with a tool error, and nothing
// is recorded or sent.
func TestUpstreamTagArgumentIsOnceboxs(t *testing.T) {
	t.Parallel()
	base, token, fake, pool := upstreamServer(t, true)
	ctx := context.Background()
	cs := mcpSession(t, base, token)
	list, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	for _, tool := range list.Tools {
		if tool.Name == "mail_send_mail" {
			schema, _ := json.Marshal(tool.InputSchema)
			require.NotContains(t, string(schema), `"ref"`, "tools/list leaves the tag argument out")
			require.Contains(t, string(schema), `"subject"`)
		}
	}
	var tools struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal([]byte(getAuthed(t, base+"/v1/tools", token)), &tools))
	seen := false
	for _, tool := range tools.Tools {
		if tool.Name == "mail.send_mail" {
			seen = true
			require.NotContains(t, string(tool.InputSchema), `"ref"`, "GET /v1/tools leaves the tag argument out")
		}
	}
	require.True(t, seen, "%+v", tools)

	status, body := postJSON(t, base, token, "/v1/ops", "tagged-1", `{"tool":"mail.send_mail","args":{"to":"ann@example.com","subject":"Hi","ref":"mine"}}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	var p struct{ Type, Field, Rule, Detail string }
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	require.Equal(t, "https://oncebox.dev/problems/invalid-args", p.Type)
	require.Equal(t, "args.ref", p.Field)
	require.Equal(t, "tag_argument", p.Rule)
	require.Contains(t, p.Detail, "set by oncebox")

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mail_send_mail", Arguments: map[string]any{"to": "ann@example.com", "subject": "Hi", "ref": "mine"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, `Invalid argument "ref": is set by oncebox`)

	var ops int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op").Scan(&ops))
	require.Zero(t, ops)
	require.Zero(t, fake.Calls())
}

// TestUpstreamLookupSettledReplaysLikeDispatched: an MCP call whose answer was lost
// and which the reconciler settled through the lookup tool is replayed over MCP as a
// dispatched one is: the stored CallToolResult, here holding the mail found.
func TestUpstreamLookupSettledReplaysLikeDispatched(t *testing.T) {
	t.Parallel()
	base, token, fake, pool := upstreamServer(t, true)
	fake.DropAfterActing(1)
	cs := mcpSession(t, base, token)
	call := func() *mcp.CallToolResult {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mail_send_mail",
			Arguments: map[string]any{"to": "cy@example.com", "subject": "Hi"}})
		require.NoError(t, err)
		return res
	}
	call()
	waitStatus(t, pool, "mail.send_mail", "succeeded")
	res := call()
	require.False(t, res.IsError, "%+v", res.Content)
	require.Equal(t, true, res.Meta["oncebox/replayed"])
	require.Equal(t, "succeeded", res.Meta["oncebox/status"])
	require.Len(t, fake.Mails(), 1)
	sc, _ := res.StructuredContent.(map[string]any)
	require.Equal(t, fake.Mails()[0].ID, sc["id"], "the CallToolResult holding the mail found: %+v", res.StructuredContent)
}
