package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/testlog"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// agentTrace is the trace context of the agent's request: its trace id and span id.
const (
	agentTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	agentSpanID  = "00f067aa0ba902b7"
)

// startTraced runs a server of the given roles on cfg with its own in-memory span
// recorder and log buffer (one "process"), and returns its base URL (API role only).
func startTraced(t *testing.T, cfg server.Config, roles server.Roles) (string, *tracetest.SpanRecorder, *testlog.Buffer, func()) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	logs := &testlog.Buffer{}
	cfg.Roles, cfg.TracerProvider, cfg.Addr = roles, tp, "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	base := ""
	if roles.API {
		addr, err := srv.Listen()
		require.NoError(t, err)
		base = "http://" + addr.String()
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			srv.Close()
		}
	}
	t.Cleanup(stop)
	return base, rec, logs, stop
}

// spanNamed returns the recorded spans named name.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestOneTraceFromHTTPEnqueueToVendorCall: an op enqueued over HTTP with the agent's
// traceparent, by an API process that does not dispatch, is dispatched by another
// process (its own tracer, its own spans): the enqueue, the dispatch attempt, its
// status changes and the vendor call are one trace, the agent's, and the webhook target
// receives that trace's traceparent. The stored trace context is the only link between
// the two processes.
func TestOneTraceFromHTTPEnqueueToVendorCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := fakewebhook.New(fakewebhook.Config{HonourKeys: true})
	hook := httptest.NewServer(fake)
	t.Cleanup(hook.Close)
	cfg, pool := newConfig(t)
	cfg.WebhookTargets = map[string]webhook.Target{"crm": {BaseURL: hook.URL}}
	cfg.WebhookNativeKeys = true
	ten, token, err := tenant.NewStore(pool).Create(ctx, "traced")
	require.NoError(t, err)

	// Process 1: the API only. Nothing dispatches the op yet.
	base, apiSpans, _, stopAPI := startTraced(t, cfg, server.Roles{API: true})
	body := `{"tool":"webhook.post","args":{"target":"crm","path":"/hook","body":{"n":1}},"conversation_id":"conv-7","tool_call_id":"call-3"}`
	req, err := http.NewRequest(http.MethodPost, base+"/v1/ops", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "traced-1")
	req.Header.Set("traceparent", "00-"+agentTraceID+"-"+agentSpanID+"-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	enq := spansNamed(apiSpans, "oncebox.enqueue")
	require.Len(t, enq, 1)
	e := enq[0]
	require.Equal(t, agentTraceID, e.SpanContext().TraceID().String())
	require.Equal(t, agentSpanID, e.Parent().SpanID().String(), "the agent's span is the enqueue's parent")
	ea := attrs(e)
	require.Equal(t, ten.ID, ea[tracing.AttrTenant].AsInt64())
	require.Equal(t, "traced-1", ea[tracing.AttrKey].AsString())
	require.Equal(t, "webhook.post", ea[tracing.AttrTool].AsString())
	require.Equal(t, "conv-7", ea[tracing.AttrConversationID].AsString())
	require.Equal(t, "call-3", ea[tracing.AttrToolCallID].AsString())
	require.Equal(t, "new", ea[tracing.AttrResult].AsString())
	opID := ea[tracing.AttrOpID].AsString()
	require.NotEmpty(t, opID)
	require.Zero(t, fake.Requests(), "the API process dispatches nothing")
	stopAPI()

	// Process 2: a worker with its own tracer dispatches the op.
	_, workerSpans, workerLogs, _ := startTraced(t, cfg, server.Roles{Worker: true})
	require.Eventually(t, func() bool {
		var status string
		err := pool.QueryRow(ctx, `SELECT status FROM oncebox_op WHERE id = $1`, opID).Scan(&status)
		return err == nil && status == "succeeded" && len(spansNamed(workerSpans, "oncebox.dispatch")) == 1
	}, time.Minute, 20*time.Millisecond)

	d := spansNamed(workerSpans, "oncebox.dispatch")[0]
	require.Equal(t, agentTraceID, d.SpanContext().TraceID().String(), "the dispatch continues the agent's trace")
	require.Equal(t, e.SpanContext().SpanID(), d.Parent().SpanID(), "the enqueue is the dispatch's parent")
	da := attrs(d)
	require.Equal(t, opID, da[tracing.AttrOpID].AsString())
	require.Equal(t, ten.ID, da[tracing.AttrTenant].AsInt64())
	require.Equal(t, "traced-1", da[tracing.AttrKey].AsString())
	require.Equal(t, "webhook.post", da[tracing.AttrTool].AsString())
	require.Equal(t, "webhook", da[tracing.AttrVendor].AsString())
	require.Equal(t, "conv-7", da[tracing.AttrConversationID].AsString())
	require.Equal(t, "call-3", da[tracing.AttrToolCallID].AsString())
	require.Equal(t, int64(1), da[tracing.AttrAttempt].AsInt64())
	require.Equal(t, "succeeded", da[tracing.AttrOutcome].AsString())

	calls := spansNamed(workerSpans, "oncebox.vendor webhook")
	require.Len(t, calls, 1)
	call := calls[0]
	require.Equal(t, trace.SpanKindClient, call.SpanKind())
	require.Equal(t, d.SpanContext().SpanID(), call.Parent().SpanID())
	effects := fake.EffectsFor(opID)
	require.Len(t, effects, 1)
	require.Equal(t, effects[0].ID, da[tracing.AttrVendorRef].AsString())
	require.Equal(t, fmt.Sprintf("00-%s-%s-01", agentTraceID, call.SpanContext().SpanID()), effects[0].Headers.Get("traceparent"),
		"the webhook target receives the vendor call's trace context")

	// Every status change of the dispatch is a span of the same trace, and its log
	// line names it.
	var changes []string
	for _, s := range spansNamed(workerSpans, "oncebox.transition") {
		require.Equal(t, agentTraceID, s.SpanContext().TraceID().String())
		a := attrs(s)
		changes = append(changes, a["oncebox.from"].AsString()+"->"+a["oncebox.to"].AsString())
	}
	// A clean run: no claim commit, the answer recorded straight from pending.
	require.ElementsMatch(t, []string{"pending->succeeded"}, changes)
	var logged int
	for _, line := range strings.Split(workerLogs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["op_id"] != opID {
			continue
		}
		require.Equal(t, agentTraceID, l["trace_id"], "log line %s", line)
		require.NotEmpty(t, l["span_id"], "log line %s", line)
		logged++
	}
	require.Positive(t, logged)

	// Support finds the trace from the key.
	base2, _, _, _ := startTraced(t, cfg, server.Roles{API: true})
	req, err = http.NewRequest(http.MethodGet, base2+"/v1/ops/traced-1?history=true", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var got struct {
		History struct {
			TraceID string `json:"trace_id"`
		} `json:"history"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Equal(t, agentTraceID, got.History.TraceID)
}

// TestUpstreamCallCarriesTheTrace: an upstream MCP server's tools/call of an op carries
// the dispatch's traceparent in _meta, in the trace the agent's call named in its own
// _meta.
func TestUpstreamCallCarriesTheTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := fakemcp.New()
	up := httptest.NewServer(fake.Handler())
	t.Cleanup(up.Close)
	cfg, pool := newConfig(t)
	cfg.ReconcileInterval = time.Second
	cfg.ToolsFile = writeCatalog(t, upstreamCatalog(up.URL, true))
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	base, spans, _, _ := startTraced(t, cfg, server.Roles{API: true, Worker: true, Periodic: true})
	res, err := mcpSession(t, base, token).CallTool(ctx, &mcp.CallToolParams{Name: "mail_send_mail",
		Arguments: map[string]any{"to": "ann@example.com", "subject": "Hi"},
		Meta:      mcp.Meta{"traceparent": "00-" + agentTraceID + "-" + agentSpanID + "-01"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	waitStatus(t, pool, "mail.send_mail", "succeeded")
	mails := fake.Mails()
	require.Len(t, mails, 1)
	sent, _ := mails[0].Meta["traceparent"].(string)
	sc := tracing.Parse(sent)
	require.Equal(t, agentTraceID, sc.TraceID().String(), "the upstream received the agent's trace: %v", mails[0].Meta)
	require.Eventually(t, func() bool {
		for _, s := range spans.Ended() {
			if strings.HasPrefix(s.Name(), "oncebox.vendor ") && s.SpanContext().SpanID() == sc.SpanID() {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the traceparent sent is the vendor call's span")
}
