package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
)

// hostile is a whole server in front of an upstream written to misbehave.
type hostile struct {
	base, token string
	srv         *server.Server
	pool        *pgxpool.Pool
	logs        *syncBuffer
	toolsFile   string
}

// hostileOncebox runs a whole server with the catalog file content (in front of an
// upstream the test runs), its log kept, cfg adjusted by tune (when not nil).
func hostileOncebox(t *testing.T, content string, tune func(*server.Config)) *hostile {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ReconcileInterval = time.Second
	cfg.WebhookTimeout = 3 * time.Second
	cfg.ToolsFile = writeCatalog(t, content)
	if tune != nil {
		tune(&cfg)
	}
	logs := &syncBuffer{}
	srv, err := server.New(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	return &hostile{base: "http://" + addr.String(), token: token, srv: srv, pool: pool, logs: logs, toolsFile: cfg.ToolsFile}
}

// waitLog waits for the log to hold want.
func (h *hostile) waitLog(t *testing.T, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(h.logs.String(), want) }, 30*time.Second, 50*time.Millisecond,
		"the log never said %q:\n%s", want, h.logs.String())
}

// classes returns the class of each mail.* tool GET /v1/tools lists, by name.
func (h *hostile) classes(t *testing.T) map[string]string {
	t.Helper()
	var list struct {
		Tools []api.ToolInfo `json:"tools"`
	}
	require.NoError(t, json.Unmarshal([]byte(getAuthed(t, h.base+"/v1/tools", h.token)), &list))
	out := map[string]string{}
	for _, tool := range list.Tools {
		if strings.HasPrefix(tool.Name, "mail.") {
			out[tool.Name] = tool.Class
		}
	}
	return out
}

// newUpstreamHTTP serves an upstream's handler, closed at the end of the test.
func newUpstreamHTTP(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	return up
}

// TestUpstreamListChangedCannotLoosenATool: the upstream lists purge_mail (unsafe)
// and send_mail (write) again as read-only, and find_mail (read) as destructive. The
// loosened tools keep their definitions (an ERROR line and a metric name each):
// purge_mail still waits for approval and send_mail still makes an op; find_mail is
// made stricter (unsafe) at once.
func TestUpstreamListChangedCannotLoosenATool(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	up := newUpstreamHTTP(t, fake.Handler())
	h := hostileOncebox(t, "upstreams: {mail: {url: "+up.URL+"}}", nil)
	require.Equal(t, map[string]string{"mail.send_mail": "write", "mail.find_mail": "read", "mail.purge_mail": "unsafe", "mail.count_mail": "read"}, h.classes(t))

	yes := true
	fake.Reannotate("purge_mail", &mcp.ToolAnnotations{ReadOnlyHint: true})
	fake.Reannotate("send_mail", &mcp.ToolAnnotations{ReadOnlyHint: true})
	fake.Reannotate("find_mail", &mcp.ToolAnnotations{DestructiveHint: &yes})
	h.waitLog(t, `upstream tool mail.purge_mail would go from unsafe to read: refused`)
	h.waitLog(t, `upstream tool mail.send_mail would go from write to read: refused`)
	require.Eventually(t, func() bool { return h.classes(t)["mail.find_mail"] == "unsafe" }, 30*time.Second, 50*time.Millisecond,
		"find_mail, listed destructive, is made unsafe: %v", h.classes(t))
	require.Equal(t, map[string]string{"mail.send_mail": "write", "mail.find_mail": "unsafe", "mail.purge_mail": "unsafe", "mail.count_mail": "read"}, h.classes(t))
	require.Contains(t, h.logs.String(), `"level":"ERROR"`)

	status, body := postJSON(t, h.base, h.token, "/v1/ops", "purge-1", `{"tool":"mail.purge_mail","args":{}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	require.Contains(t, body, `"status":"awaiting_approval"`, "still gated")
	status, body = postJSON(t, h.base, h.token, "/v1/ops", "find-1", `{"tool":"mail.find_mail","args":{"ref":"x"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	require.Contains(t, body, `"status":"awaiting_approval"`, "made stricter: gated")
	status, body = postJSON(t, h.base, h.token, "/v1/ops?wait=20s", "send-1", `{"tool":"mail.send_mail","args":{"to":"a@example.com","subject":"Hi"}}`)
	require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, status, body)
	require.Contains(t, body, `"key":"send-1"`, "still a write tool: an op")
	waitStatus(t, h.pool, "mail.send_mail", "succeeded")

	metrics := getBody(t, h.base+"/metrics")
	require.Contains(t, metrics, `oncebox_upstream_tool_loosening_refused_total{tool="mail.purge_mail",upstream="mail"}`)
	require.Contains(t, metrics, `oncebox_upstream_tool_loosening_refused_total{tool="mail.send_mail",upstream="mail"}`)
	require.NotContains(t, metrics, `oncebox_upstream_tool_loosening_refused_total{tool="mail.find_mail"`)
}

// TestUpstreamReloadCannotLoosenATool: a reload that makes an unsafe upstream tool
// write, or drops a tool's approval rule, is refused for that tool (ERROR line,
// metric) while the rest of the file is taken: the tools stay gated.
func TestUpstreamReloadCannotLoosenATool(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	up := newUpstreamHTTP(t, fake.Handler())
	file := func(send, count string) string {
		return `
upstreams:
  mail:
    url: ` + up.URL + `
    tools:
      send_mail: ` + send + `
      count_mail: ` + count + `
`
	}
	h := hostileOncebox(t, file(`{class: unsafe}`, `{approval: {mode: always}}`), nil)
	require.Equal(t, "unsafe", h.classes(t)["mail.send_mail"])
	require.Equal(t, "write", h.classes(t)["mail.count_mail"], "approval without class on a read-only tool: at least write")

	require.NoError(t, os.WriteFile(h.toolsFile, []byte(file(`{class: write}`, `{class: read}`)), 0o600))
	require.NoError(t, h.srv.ReloadCatalog(context.Background()))
	require.Contains(t, h.logs.String(), `upstream tool mail.send_mail would go from unsafe to write: refused`)
	require.Contains(t, h.logs.String(), `upstream tool mail.count_mail would go from write to read: refused`)
	require.Equal(t, "unsafe", h.classes(t)["mail.send_mail"])
	require.Equal(t, "write", h.classes(t)["mail.count_mail"])

	require.NoError(t, os.WriteFile(h.toolsFile, []byte(file(`{class: unsafe}`, `{class: write}`)), 0o600))
	require.NoError(t, h.srv.ReloadCatalog(context.Background()))
	require.Contains(t, h.logs.String(), `upstream tool mail.count_mail would lose its approval rule: refused`)

	for _, c := range []struct{ key, tool, args string }{{"send-1", "mail.send_mail", `{"to":"a@example.com","subject":"Hi"}`}, {"count-1", "mail.count_mail", `{}`}} {
		status, body := postJSON(t, h.base, h.token, "/v1/ops", c.key, `{"tool":"`+c.tool+`","args":`+c.args+`}`)
		require.Equal(t, http.StatusAccepted, status, body)
		require.Contains(t, body, `"status":"awaiting_approval"`, c.tool)
	}
	require.Empty(t, fake.Mails())
	require.Contains(t, getBody(t, h.base+"/metrics"), `oncebox_upstream_tool_loosening_refused_total{tool="mail.count_mail",upstream="mail"} 2`)
}

// restartableUpstream serves h on one address that can be shut (connections refused)
// and served again.
type restartableUpstream struct {
	t    *testing.T
	h    http.Handler
	addr string
	srv  *httptest.Server
}

func newRestartableUpstream(t *testing.T, h http.Handler) *restartableUpstream {
	t.Helper()
	u := &restartableUpstream{t: t, h: h}
	u.start()
	u.addr = u.srv.Listener.Addr().String()
	t.Cleanup(func() {
		if u.srv != nil {
			u.stop()
		}
	})
	return u
}

func (u *restartableUpstream) start() {
	u.t.Helper()
	u.srv = httptest.NewUnstartedServer(u.h)
	if u.addr != "" {
		ln, err := net.Listen("tcp", u.addr)
		require.NoError(u.t, err)
		u.srv.Listener = ln
	}
	u.srv.Start()
}

func (u *restartableUpstream) stop() {
	u.srv.Listener.Close()
	u.srv.CloseClientConnections() // the standalone SSE stream's handler ends with its connection
	u.srv.Close()
	u.srv = nil
}

// TestUpstreamRefusedConnectionIsNotSent: the HTTP upstream goes down while its session
// is open (connections refused): a dispatch is not sent, so it is retried, never
// unknown; once the upstream is up again the op succeeds, sent once.
func TestUpstreamRefusedConnectionIsNotSent(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	up := newRestartableUpstream(t, fake.Handler())
	h := hostileOncebox(t, "upstreams: {mail: {url: http://"+up.addr+"}}", func(cfg *server.Config) { cfg.RetryMaxBackoff = time.Second })
	require.Equal(t, "write", h.classes(t)["mail.send_mail"])
	up.stop()

	status, body := postJSON(t, h.base, h.token, "/v1/ops", "refused-1", `{"tool":"mail.send_mail","args":{"to":"a@example.com","subject":"Hi"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	ctx := context.Background()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, h.pool.QueryRow(ctx, "SELECT count(*) FROM "+opstate.AttemptRows+" a WHERE finished_at IS NOT NULL").Scan(&n))
		return n >= 2
	}, 30*time.Second, 50*time.Millisecond, "two attempts refused")
	var st string
	require.NoError(t, h.pool.QueryRow(ctx, "SELECT status FROM oncebox_op").Scan(&st))
	require.Equal(t, "pending", st, "a refused connection is not sent: retried")

	up.start()
	waitStatus(t, h.pool, "mail.send_mail", "succeeded")
	require.Len(t, fake.Mails(), 1)
	rows, err := h.pool.Query(ctx, "SELECT attempt, coalesce(outcome, ''), coalesce(error, '') FROM "+opstate.AttemptRows+" a ORDER BY attempt")
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var n int
		var outcome, msg string
		require.NoError(t, rows.Scan(&n, &outcome, &msg))
		require.NotEqual(t, "unknown", outcome, "attempt %d: %s", n, msg)
	}
	require.NoError(t, rows.Err())
	var events int
	require.NoError(t, h.pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op_event WHERE to_status IN ('unknown', 'needs_review')").Scan(&events))
	require.Zero(t, events)
}

// waitSettled waits for the only op of tool to leave pending and running, and returns
// its status.
func waitSettled(t *testing.T, pool *pgxpool.Pool, tool string) string {
	t.Helper()
	var got string
	require.Eventually(t, func() bool {
		err := pool.QueryRow(context.Background(), "SELECT status FROM oncebox_op WHERE tool = $1", tool).Scan(&got)
		return err == nil && got != "pending" && got != "running"
	}, 60*time.Second, 50*time.Millisecond, "op of %s: %s", tool, got)
	return got
}

// TestUpstreamGarbageFailsOnlyItsCall: while a write is being carried out upstream, a
// read on the same session is answered with truncated JSON. The read fails, alone;
// the write's answer arrives and the op succeeds (not unknown, not held for review).
func TestUpstreamGarbageFailsOnlyItsCall(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	up := newUpstreamHTTP(t, fake.Handler())
	h := hostileOncebox(t, "upstreams: {mail: {url: "+up.URL+"}}", nil)
	acted, gate := make(chan struct{}, 1), make(chan struct{})
	fake.EffectHook(func(fakemcp.Mail) { acted <- struct{}{}; <-gate })
	fake.GarbageNext("count_mail", 1)

	status, body := postJSON(t, h.base, h.token, "/v1/ops", "write-1", `{"tool":"mail.send_mail","args":{"to":"a@example.com","subject":"Hi"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	select {
	case <-acted:
	case <-time.After(30 * time.Second):
		t.Fatal("the write never reached the upstream")
	}
	status, body = postJSON(t, h.base, h.token, "/v1/ops", "", `{"tool":"mail.count_mail","args":{}}`)
	close(gate)
	require.Equal(t, "succeeded", waitSettled(t, h.pool, "mail.send_mail"), "the write's answer arrived: not unknown")
	require.NotEqual(t, http.StatusOK, status, body)
	require.Contains(t, body, "not a JSON-RPC message", "the read fails, saying why")
	require.Len(t, fake.Mails(), 1)
	require.Equal(t, 1, fake.Garbled())

	status, body = postJSON(t, h.base, h.token, "/v1/ops", "", `{"tool":"mail.count_mail","args":{}}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `\"count\":1`, "the session goes on")
}

// TestUpstreamGarbledLookupLooksAgain: a write's answer is lost after the upstream
// acted, and the lookup that follows is answered with truncated JSON. That lookup
// fails alone: the op is looked up again (not sent to review as if the upstream could
// not be asked), found, and succeeds, sent once.
func TestUpstreamGarbledLookupLooksAgain(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	up := newUpstreamHTTP(t, fake.Handler())
	h := hostileOncebox(t, "upstreams: {mail: {url: "+up.URL+", tools: {send_mail: {tag_argument: ref, lookup_tool: find_mail, lookup_argument: ref}}}}",
		func(cfg *server.Config) { cfg.ReconcileRetryAfter = time.Second })
	fake.DropAfterActing(1)
	fake.GarbageNext("find_mail", 1)

	status, body := postJSON(t, h.base, h.token, "/v1/ops", "lost-1", `{"tool":"mail.send_mail","args":{"to":"a@example.com","subject":"Hi"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	require.Equal(t, "succeeded", waitSettledNot(t, h.pool, "mail.send_mail", "unknown"), "looked up again after the garbage")
	require.Equal(t, 1, fake.Garbled(), "the first lookup was answered with garbage")
	require.Len(t, fake.Mails(), 1)
	require.Equal(t, 1, fake.Calls(), "never sent again")
}

// waitSettledNot is waitSettled, also waiting while the op is in status also.
func waitSettledNot(t *testing.T, pool *pgxpool.Pool, tool, also string) string {
	t.Helper()
	var got string
	require.Eventually(t, func() bool {
		err := pool.QueryRow(context.Background(), "SELECT status FROM oncebox_op WHERE tool = $1", tool).Scan(&got)
		return err == nil && got != "pending" && got != "running" && got != "dispatching" && got != also
	}, 60*time.Second, 50*time.Millisecond, "op of %s: %s", tool, got)
	return got
}

// TestUpstreamResultSizeLimit: an upstream with max_result_bytes 4096 answers a write
// with 64 KiB: the op fails (result_too_large, with a sentence), nothing large is
// stored, and the next call on the session succeeds.
func TestUpstreamResultSizeLimit(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	up := newUpstreamHTTP(t, fake.Handler())
	h := hostileOncebox(t, "upstreams: {mail: {url: "+up.URL+", max_result_bytes: 4096}}", nil)
	fake.RawResultNext(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 64<<10) + `"}]}`)

	status, body := postJSON(t, h.base, h.token, "/v1/ops", "big-1", `{"tool":"mail.send_mail","args":{"to":"a@example.com","subject":"Hi"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	require.Equal(t, "failed", waitSettled(t, h.pool, "mail.send_mail"))
	body = getAuthed(t, h.base+"/v1/ops/big-1", h.token)
	require.Contains(t, body, "result_too_large", body)
	require.Contains(t, body, "max_result_bytes (4096 bytes)", body)
	var size int
	require.NoError(t, h.pool.QueryRow(context.Background(), "SELECT coalesce(length(result::text), 0) + coalesce(length(error::text), 0) FROM oncebox_op").Scan(&size))
	require.Less(t, size, 4096, "nothing large is stored")

	status, body = postJSON(t, h.base, h.token, "/v1/ops?wait=20s", "small-1", `{"tool":"mail.send_mail","args":{"to":"b@example.com","subject":"Hi"}}`)
	require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, status, body)
	require.Contains(t, body, `"status":"succeeded"`, body)
}

// TestUpstreamStdioResultSizeLimit: a stdio upstream with max_result_bytes 4096
// answers a write with 64 KiB: the op fails (result_too_large) and nothing large is
// stored; the next op on the session succeeds.
func TestUpstreamStdioResultSizeLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, _, pool, state := stdioOncebox(t, "send_mail: {tag_argument: ref}\n    max_result_bytes: 4096", nil)
	tn, err := tenant.NewStore(pool).ByName(ctx, "acme")
	require.NoError(t, err)
	require.NoError(t, fakemcp.WriteRawNext(state, `{"content":[{"type":"text","text":"`+strings.Repeat("x", 64<<10)+`"}]}`))
	_, err = srv.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "big-stdio", Tool: "box.send_mail",
		Args: json.RawMessage(`{"to":"cy@example.com","subject":"Hi"}`)})
	require.NoError(t, err)
	require.Equal(t, "failed", waitSettled(t, pool, "box.send_mail"))
	var errText string
	var size int
	require.NoError(t, pool.QueryRow(ctx, "SELECT coalesce(error::text, ''), coalesce(length(result::text), 0) + coalesce(length(error::text), 0) FROM oncebox_op").Scan(&errText, &size))
	require.Contains(t, errText, "result_too_large")
	require.Less(t, size, 4096)
	_, err = srv.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "small-stdio", Tool: "box.send_mail",
		Args: json.RawMessage(`{"to":"dee@example.com","subject":"Hi"}`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var st string
		return pool.QueryRow(ctx, "SELECT status FROM oncebox_op WHERE idempotency_key = 'small-stdio'").Scan(&st) == nil && st == "succeeded"
	}, 60*time.Second, 50*time.Millisecond)
}

// TestUpstreamOddlyTypedAnswersFailOnlyTheirCall: the upstream answers reads with
// garbage, too large an answer or a type that is neither JSON nor SSE, under
// Content-Type spellings the SDK's client reads as JSON or SSE (case, parameters,
// spacing). Each fails its own call, saying why; the next call on the same session
// succeeds, and the session is never opened again (oncebox_upstream_restarts_total
// stays 0).
func TestUpstreamOddlyTypedAnswersFailOnlyTheirCall(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	up := newUpstreamHTTP(t, fake.Handler())
	h := hostileOncebox(t, "upstreams: {mail: {url: "+up.URL+", max_result_bytes: 4096}}", nil)
	require.Equal(t, "read", h.classes(t)["mail.count_mail"])
	for _, c := range []struct {
		answer fakemcp.Answer
		want   string
	}{
		{fakemcp.Answer{ContentType: "Application/JSON", Garbage: true}, "not a JSON-RPC message"},
		{fakemcp.Answer{ContentType: "application/JSON ; charset=UTF-8", Garbage: true}, "not a JSON-RPC message"},
		{fakemcp.Answer{ContentType: "Text/Event-Stream", Garbage: true}, "not a JSON-RPC message"},
		{fakemcp.Answer{ContentType: "TEXT/event-stream;charset=utf-8", Size: 64 << 10}, "larger than max_result_bytes (4096 bytes)"},
		{fakemcp.Answer{ContentType: "Application/Json", Size: 64 << 10}, "larger than max_result_bytes (4096 bytes)"},
		{fakemcp.Answer{ContentType: "text/html", Garbage: true}, "not a JSON-RPC message"},
	} {
		fake.AnswerNext("count_mail", c.answer)
		status, body := postJSON(t, h.base, h.token, "/v1/ops", "", `{"tool":"mail.count_mail","args":{}}`)
		require.Equal(t, http.StatusBadGateway, status, "%+v: %s", c.answer, body)
		require.Contains(t, body, c.want, "%+v", c.answer)
		status, body = postJSON(t, h.base, h.token, "/v1/ops", "", `{"tool":"mail.count_mail","args":{}}`)
		require.Equal(t, http.StatusOK, status, "%+v: the next call: %s", c.answer, body)
		require.Contains(t, body, `\"count\":0`, "%+v: the session goes on", c.answer)
	}
	require.Equal(t, 6, fake.Answered())
	metrics := getBody(t, h.base+"/metrics")
	require.Contains(t, metrics, "\n"+`oncebox_upstream_restarts_total{upstream="mail"} 0`+"\n", "no session lost")
	require.NotContains(t, h.logs.String(), "upstream session ended")
}
