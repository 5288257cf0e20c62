package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
)

type env struct {
	pool    *pgxpool.Pool
	ob      *outbox.Outbox
	tenants *tenant.Store
	srv     *mcpserver.Server
	tenant  int64
	token   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with the server's dedupe windows set (nil: the defaults) and
// budgets.
func newEnvWith(t *testing.T, windows map[string]time.Duration, budgets ...governance.Budget) *env {
	t.Helper()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"crm"}})...)
	require.NoError(t, err)
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg, Budgets: budgets})
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(t, err)
	tenants := tenant.NewStore(pool)
	ten, token, err := tenants.Create(context.Background(), "t")
	require.NoError(t, err)
	// The payments the tests refund were made outside oncebox: the tenant adopts them.
	_, err = tenants.Adopt(context.Background(), "t", "stripe", []string{"pi_1", "pi_2"}, "test")
	require.NoError(t, err)
	srv, err := mcpserver.New(mcpserver.Config{Outbox: ob, Tenants: tenants, Wait: 50 * time.Millisecond, DedupeWindows: windows})
	require.NoError(t, err)
	return &env{pool: pool, ob: ob, tenants: tenants, srv: srv, tenant: ten.ID, token: token}
}

// inMemory connects the SDK's client to the tenant's MCP server over in-memory transports.
func (e *env) inMemory(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := e.srv.MCPServer(e.tenant).Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// overHTTP serves the handler with httptest and connects the SDK's client to it.
func (e *env) overHTTP(t *testing.T) (*mcp.ClientSession, *httptest.Server) {
	t.Helper()
	ts := httptest.NewServer(e.srv.HTTPHandler())
	t.Cleanup(ts.Close)
	return e.connectHTTP(t, ts), ts
}

// sessionClient makes a client speak 2025-11-25, the last revision with sessions (the
// SDK's default, 2026-07-28, has none): the tests of sessions use it.
var sessionClient = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

func (e *env) connectHTTP(t *testing.T, ts *httptest.Server) *mcp.ClientSession {
	t.Helper()
	transport := &mcp.StreamableClientTransport{
		Endpoint:   ts.URL,
		HTTPClient: &http.Client{Transport: bearer{token: e.token, next: http.DefaultTransport}},
		MaxRetries: -1,
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), transport, sessionClient)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func (e *env) countOps(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM oncebox_op").Scan(&n))
	return n
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	require.NoError(t, err)
	require.NotEmpty(t, res.Content)
	return res
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	tc, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok, "content is %T", res.Content[0])
	return tc.Text
}

// structured decodes the result's structured content into an OpView.
func structured(t *testing.T, res *mcp.CallToolResult) mcpserver.OpView {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var v mcpserver.OpView
	require.NoError(t, json.Unmarshal(b, &v))
	return v
}

func payment(amount int) map[string]any {
	return map[string]any{"amount": amount, "currency": "usd", "description": "order 1"}
}

// replaysByToolCallID calls a tool twice with the same tool call id and checks there
// is one op and the second answer says it was a replay.
func replaysByToolCallID(t *testing.T, e *env, cs *mcp.ClientSession) {
	t.Helper()
	meta := mcp.Meta{mcpserver.MetaConversationID: "conv-1", mcpserver.MetaToolCallID: "call_1"}

	first := call(t, cs, "stripe_payment_intent", payment(500), meta)
	require.False(t, first.IsError, text(t, first))
	require.Contains(t, text(t, first), "Not confirmed yet: this payment is recorded")
	require.NotContains(t, text(t, first), "already requested earlier")
	v1 := structured(t, first)
	require.False(t, v1.Replayed)
	require.Equal(t, "pending", v1.Status)
	require.Equal(t, "call_1", v1.ToolCallID)
	require.Equal(t, "conv-1", v1.ConversationID)
	require.True(t, strings.HasPrefix(v1.Key, "mcp_"))
	require.Len(t, v1.Key, 4+48)

	second := call(t, cs, "stripe_payment_intent", payment(500), meta)
	require.False(t, second.IsError)
	require.Contains(t, text(t, second), "This payment was already requested earlier and was not repeated now")
	v2 := structured(t, second)
	require.True(t, v2.Replayed)
	require.Equal(t, v1.ID, v2.ID)
	require.Equal(t, 1, e.countOps(t))
}

func TestToolCallIDReplayInMemory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	replaysByToolCallID(t, e, e.inMemory(t))
}

func TestToolCallIDReplayOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs, _ := e.overHTTP(t)
	replaysByToolCallID(t, e, cs)
}

func TestBareMetaKeysAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := e.inMemory(t)
	meta := mcp.Meta{"conversation_id": "c", "tool_call_id": "toolu_1"}
	v1 := structured(t, call(t, cs, "stripe_payment_intent", payment(100), meta))
	v2 := structured(t, call(t, cs, "stripe_payment_intent", payment(100), meta))
	require.Equal(t, "toolu_1", v1.ToolCallID)
	require.Equal(t, "c", v1.ConversationID)
	require.True(t, v2.Replayed)
	require.Equal(t, 1, e.countOps(t))
}

func TestSamePayloadWithoutToolCallID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := e.inMemory(t)
	conv := mcp.Meta{mcpserver.MetaConversationID: "conv-a"}

	first := call(t, cs, "stripe_payment_intent", payment(700), conv)
	second := call(t, cs, "stripe_payment_intent", payment(700), conv)
	require.False(t, structured(t, first).Replayed)
	require.True(t, structured(t, second).Replayed)
	require.Contains(t, text(t, second), "was not repeated now")
	require.Equal(t, 1, e.countOps(t))

	other := call(t, cs, "stripe_payment_intent", payment(701), conv)
	require.False(t, structured(t, other).Replayed)
	require.Equal(t, 2, e.countOps(t))

	// The same payload in another conversation is another op.
	elsewhere := call(t, cs, "stripe_payment_intent", payment(700), mcp.Meta{mcpserver.MetaConversationID: "conv-b"})
	require.False(t, structured(t, elsewhere).Replayed)
	require.Equal(t, 3, e.countOps(t))

	// Without any _meta the session is the conversation: same payload twice, one op.
	bare1 := structured(t, call(t, cs, "stripe_payment_intent", payment(900), nil))
	bare2 := structured(t, call(t, cs, "stripe_payment_intent", payment(900), nil))
	require.False(t, bare1.Replayed)
	require.True(t, bare2.Replayed)
	require.Equal(t, 4, e.countOps(t))
}

// TestHTTPSessionsAreSeparateConversationsWithoutWindow: with the tool's dedupe window
// off, a call that names no conversation belongs to its MCP session.
func TestHTTPSessionsAreSeparateConversationsWithoutWindow(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, map[string]time.Duration{protocol.ToolPaymentIntent: 0})
	cs1, ts := e.overHTTP(t)
	cs2 := e.connectHTTP(t, ts)

	a1 := structured(t, call(t, cs1, "stripe_payment_intent", payment(300), nil))
	a2 := structured(t, call(t, cs1, "stripe_payment_intent", payment(300), nil))
	require.True(t, a2.Replayed)
	require.Equal(t, a1.ID, a2.ID)

	b := structured(t, call(t, cs2, "stripe_payment_intent", payment(300), nil))
	require.False(t, b.Replayed, "another MCP session is another conversation")
	require.NotEqual(t, a1.ID, b.ID)
	require.Equal(t, 2, e.countOps(t))
}

func TestConflictingPayloadForSameToolCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := e.inMemory(t)
	meta := mcp.Meta{mcpserver.MetaConversationID: "c", mcpserver.MetaToolCallID: "call_9"}
	call(t, cs, "stripe_payment_intent", payment(500), meta)

	res := call(t, cs, "stripe_payment_intent", payment(501), meta)
	require.True(t, res.IsError)
	require.Contains(t, text(t, res), "already made earlier with other arguments")
	require.Contains(t, text(t, res), "Nothing was executed")
	require.Equal(t, 1, e.countOps(t))
}

func TestInvalidArgsNameTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := e.inMemory(t)

	for _, tc := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"stripe_payment_intent", map[string]any{"amount": 0, "currency": "usd"}, `"amount"`},
		{"stripe_payment_intent", map[string]any{"amount": 5, "currency": "USD"}, `"currency"`},
		{"stripe_payment_intent", map[string]any{"amount": 5, "currency": "usd", "idempotency_key": "k"}, `"idempotency_key"`},
		{"stripe_refund", map[string]any{"amount": 5}, `"payment_intent"`},
		{"webhook_post", map[string]any{"target": "billing", "path": "/x"}, `"target"`},
		{"sendgrid_mail", map[string]any{"from": map[string]any{"email": "a@example.com"}, "to": []any{}, "subject": "s", "text": "t"}, `"to"`},
	} {
		res := call(t, cs, tc.tool, tc.args, nil)
		require.True(t, res.IsError, "%s %v", tc.tool, tc.args)
		require.Contains(t, text(t, res), "Invalid argument "+tc.field)
		require.Contains(t, text(t, res), "Nothing was executed")
	}
	require.Equal(t, 0, e.countOps(t))
}

func TestToolsHaveSchemasWithoutKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := e.inMemory(t)
	list, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)

	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		require.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, tool.Name, "valid for the strictest MCP clients")
		b, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		var schema struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		require.NoError(t, json.Unmarshal(b, &schema))
		require.Equal(t, "object", schema.Type)
		require.NotNil(t, schema.AdditionalProperties, tool.Name)
		require.False(t, *schema.AdditionalProperties, tool.Name)
		require.NotEmpty(t, schema.Properties)
		for prop := range schema.Properties {
			require.NotContains(t, strings.ToLower(prop), "key", "%s offers a key field %q", tool.Name, prop)
			require.NotContains(t, strings.ToLower(prop), "idempot", tool.Name)
		}
	}
	require.ElementsMatch(t, []string{"stripe_payment_intent", "stripe_refund", "sendgrid_mail", "webhook_post"}, names)
	for _, n := range names {
		for _, word := range []string{"approv", "reject", "resolve", "decide", "review"} {
			require.NotContains(t, n, word, "MCP never offers a way to decide an op")
		}
	}
}

func TestResultTextPerStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := e.inMemory(t)
	meta := mcp.Meta{mcpserver.MetaConversationID: "c", mcpserver.MetaToolCallID: "call_s"}
	args := map[string]any{"target": "crm", "path": "/contacts", "body": map[string]any{"name": "Ada"}}
	v := structured(t, call(t, cs, "webhook_post", args, meta))

	for _, tc := range []struct {
		status, result, errJSON string
		want                    []string
		isError                 bool
	}{
		{status: "succeeded", result: `{"status": 201}`, want: []string{"This webhook post was already requested earlier and was not repeated now: it was carried out then.", `{"status":201}`, `"occurrence": 2`}},
		{status: "failed", errJSON: `{"class":"permanent","code":"bad_request","message":"contact exists"}`, want: []string{"already requested earlier", "the vendor refused it then, so nothing was carried out", "contact exists (bad_request)"}, isError: true},
		{status: "awaiting_approval", want: []string{"This webhook post was already requested earlier and was not repeated now: it is waiting for a person's approval and has not been carried out."}},
		{status: "needs_review", errJSON: `{"class":"unknown","code":"timeout"}`, want: []string{"already requested earlier", "could not confirm whether the vendor carried it out, so it may have been done", "Do not call the tool again"}},
		{status: "needs_review", errJSON: `{"class":"sealed_args","message":"m","nothing_sent":true}`, want: []string{"already requested earlier", "was NOT sent to the vendor, so nothing was carried out"}},
		{status: "rejected", want: []string{"already requested earlier", "a person rejected it, so it was not carried out and will not be"}},
		{status: "unknown", want: []string{"already requested earlier", "the vendor has not confirmed it yet (status unknown)", "Do not call the tool again", "GET /v1/ops/" + v.Key}},
	} {
		_, err := e.pool.Exec(context.Background(),
			"UPDATE oncebox_op SET status = $1, result = $2::json, error = $3::json WHERE id = $4",
			tc.status, nullable(tc.result), nullable(tc.errJSON), v.ID)
		require.NoError(t, err)
		res := call(t, cs, "webhook_post", args, meta)
		for _, w := range tc.want {
			require.Contains(t, text(t, res), w, tc.status)
		}
		require.Equal(t, tc.isError, res.IsError, tc.status)
		require.Equal(t, tc.status, structured(t, res).Status)
	}
	require.Equal(t, 1, e.countOps(t))
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func TestHTTPNeedsToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ts := httptest.NewServer(e.srv.HTTPHandler())
	t.Cleanup(ts.Close)

	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, auth := range []string{"", "Bearer obx_not-a-token", "Basic abc"} {
		req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, auth)
	}
	require.Equal(t, 0, e.countOps(t))
}

// TestHTTPRefusesApproverAndAdminTokens: MCP tools enqueue ops, which only agent tokens
// do; a person's token (an approver's, an admin's, an auditor's) gets 403 and records nothing.
func TestHTTPRefusesApproverAndAdminTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tenants := tenant.NewStore(e.pool)
	ts := httptest.NewServer(e.srv.HTTPHandler())
	t.Cleanup(ts.Close)

	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	post := func(token string) int {
		req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for _, role := range []tenant.Role{tenant.RoleApprover, tenant.RoleAdmin, tenant.RoleAuditor} {
		token, err := tenants.NewTokenWithRole(context.Background(), "t", role)
		require.NoError(t, err)
		require.Equal(t, http.StatusForbidden, post(token), role)
	}
	require.Equal(t, http.StatusOK, post(e.token), "the agent token opens a session")
	require.Equal(t, 0, e.countOps(t))
}

// sessionSpy remembers the Mcp-Session-Id the server hands out.
type sessionSpy struct {
	bearer
	mu sync.Mutex
	id string
}

func (s *sessionSpy) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.bearer.RoundTrip(r)
	if err == nil {
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			s.mu.Lock()
			s.id = id
			s.mu.Unlock()
		}
	}
	return resp, err
}

func TestHTTPSessionRefusesAnotherTenantsToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ts := httptest.NewServer(e.srv.HTTPHandler())
	t.Cleanup(ts.Close)
	spy := &sessionSpy{bearer: bearer{token: e.token, next: http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: &http.Client{Transport: spy}, MaxRetries: -1}, sessionClient)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	spy.mu.Lock()
	sessionID := spy.id
	spy.mu.Unlock()
	require.NotEmpty(t, sessionID)

	_, otherToken, err := tenant.NewStore(e.pool).Create(context.Background(), "other")
	require.NoError(t, err)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"stripe_payment_intent","arguments":{"amount":5,"currency":"usd"}}}`
	req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sessionID)
	req.Header.Set("Authorization", "Bearer "+otherToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, 0, e.countOps(t))
}

// TestConversationSurvivesARestart: over stdio there is no session id, so a call
// without _meta belongs to the server instance; with Config.Conversation set, a
// restarted server still recognises the retry.
func TestConversationSurvivesARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"crm"}})...)
	require.NoError(t, err)
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg})
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(t, err)
	tenants := tenant.NewStore(pool)
	ten, _, err := tenants.Create(ctx, "t")
	require.NoError(t, err)

	connect := func(conversation string) *mcp.ClientSession {
		srv, err := mcpserver.New(mcpserver.Config{Outbox: ob, Tenants: tenants, Wait: 50 * time.Millisecond, Conversation: conversation})
		require.NoError(t, err)
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.MCPServer(ten.ID).Connect(ctx, st, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}

	first := structured(t, call(t, connect("desk-1"), "stripe_payment_intent", payment(500), nil))
	require.False(t, first.Replayed)
	again := structured(t, call(t, connect("desk-1"), "stripe_payment_intent", payment(500), nil))
	require.True(t, again.Replayed, "a restarted server with the same conversation recognises the retry")
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, "conversation:desk-1", again.ConversationID)

	fresh := structured(t, call(t, connect(""), "stripe_payment_intent", payment(500), nil))
	require.False(t, fresh.Replayed, "without it, each server instance is a conversation of its own")
}

// TestStructuredContentCarriesTheSentence: clients that hand the model the structured
// content instead of the text (Mastra's MCP client) still give it the sentence that says
// what happened: the structured content's message is the text, for a new op, a replay and
// a call matched by its identity fields.
func TestStructuredContentCarriesTheSentence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := e.inMemory(t)
	args := payment(1200)
	for _, res := range []*mcp.CallToolResult{
		call(t, cs, "stripe_payment_intent", args, nil),
		call(t, cs, "stripe_payment_intent", args, nil),
		call(t, cs, "stripe_payment_intent", map[string]any{"amount": 1200, "currency": "usd", "description": "order 1, reworded"}, nil),
	} {
		v := structured(t, res)
		require.NotEmpty(t, v.Message, "the structured content has no message")
		require.Equal(t, text(t, res), v.Message)
	}
	require.Equal(t, 1, e.countOps(t))
}
