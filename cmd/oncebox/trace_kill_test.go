package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// collectedSpan is one span an OTLP/HTTP export delivered to the test's collector.
type collectedSpan struct {
	name, traceID, spanID, parentID string
	attrs                           map[string]string
}

// otlpCollector is an OTLP/HTTP trace receiver (POST /v1/traces, protobuf).
type otlpCollector struct {
	mu    sync.Mutex
	spans []collectedSpan
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	req := &coltracepb.ExportTraceServiceRequest{}
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				cs := collectedSpan{name: s.Name, traceID: hex.EncodeToString(s.TraceId), spanID: hex.EncodeToString(s.SpanId),
					parentID: hex.EncodeToString(s.ParentSpanId), attrs: map[string]string{}}
				for _, kv := range s.Attributes {
					if sv := kv.Value.GetStringValue(); sv != "" {
						cs.attrs[kv.Key] = sv
					}
				}
				c.spans = append(c.spans, cs)
			}
		}
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// forOp returns the collected spans about op id.
func (c *otlpCollector) forOp(id string) []collectedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []collectedSpan
	for _, s := range c.spans {
		if s.attrs[string(tracing.AttrOpID)] == id {
			out = append(out, s)
		}
	}
	return out
}

// TestTraceAcrossSIGKILL: the agent's trace follows its op into a real `oncebox serve`
// worker that is SIGKILLed after the target acted, and into the next serve that settles
// the op: both export (OTLP over HTTP, configured by OTEL_* variables only) spans of the
// agent's trace, parented under the enqueue's span recorded by this process, and the
// target received the agent's trace id in traceparent.
func TestTraceAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	conn := dbtest.ConnString(t, pool)
	crm := newBlockedCRM(t)
	collector := &otlpCollector{}
	otlp := httptest.NewServer(collector)
	t.Cleanup(otlp.Close)
	otelEnv := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_TRACES_EXPORTER=", "OTEL_SDK_DISABLED="}

	// This process records the op (API role only), traced in memory.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	api, tn := crm.apiProcess(t, pool, func(cfg *server.Config) { cfg.TracerProvider = tp })

	workerArgs := "serve --database-url " + conn + " --tools-file " + crm.toolsFile + killWorkerFlags
	first, _ := startChild(t, workerArgs+" --roles worker", otelEnv...)

	agent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xa1, 0x6e, 0x47}, SpanID: trace.SpanID{0x5a},
		TraceFlags: trace.FlagsSampled, Remote: true})
	res, err := api.Outbox().Enqueue(trace.ContextWithRemoteSpanContext(ctx, agent), outbox.EnqueueParams{TenantID: tn.ID,
		Key: "lead-1", Tool: "crm.create_lead", Args: json.RawMessage(`{"name":"Ada"}`), ConversationID: "conv-1", ToolCallID: "call-1"})
	require.NoError(t, err)
	require.Len(t, rec.Ended(), 1)
	enqueue := rec.Ended()[0]
	require.Equal(t, "oncebox.enqueue", enqueue.Name())
	require.Equal(t, agent.TraceID(), enqueue.SpanContext().TraceID())
	crm.waitActed(t)
	// The killed process's own spans may be lost with it; the claim's was exported
	// while the vendor call hung.
	require.Eventually(t, func() bool { return len(collector.forOp(res.Op.ID)) > 0 }, 20*time.Second, 50*time.Millisecond,
		"the first serve exported no span of the op")
	crm.kill(t, first)
	require.Equal(t, agent.TraceID().String(), tracing.TraceID(crm.fake.EffectsFor(res.Op.ID)[0].Headers.Get("traceparent")),
		"the target received the agent's trace")
	firstSpans := len(collector.forOp(res.Op.ID))

	_, _ = pool.Exec(ctx, "DELETE FROM river_leader") // the dead process's leadership
	startChild(t, workerArgs+" --roles worker,periodic", otelEnv...)
	var op *outbox.Op
	require.Eventually(t, func() bool {
		op, err = api.Outbox().Get(ctx, tn.ID, "lead-1")
		if err != nil || op.Status != protocol.StatusSucceeded {
			return false
		}
		for _, s := range collector.forOp(res.Op.ID) {
			if s.name == "oncebox.transition" && s.attrs["oncebox.to"] == "succeeded" {
				return true
			}
		}
		return false
	}, 120*time.Second, 200*time.Millisecond, "op: %+v", op)

	spans := collector.forOp(res.Op.ID)
	require.Greater(t, len(spans), firstSpans, "the second serve exported spans of the op")
	for _, s := range spans {
		require.Equal(t, agent.TraceID().String(), s.traceID, "span %s is not in the agent's trace", s.name)
		require.Equal(t, "lead-1", s.attrs[string(tracing.AttrKey)], "span %s", s.name)
		require.Equal(t, "conv-1", s.attrs[string(tracing.AttrConversationID)], "span %s", s.name)
		require.Equal(t, "call-1", s.attrs[string(tracing.AttrToolCallID)], "span %s", s.name)
		if s.name == "oncebox.dispatch" {
			require.Equal(t, enqueue.SpanContext().SpanID().String(), s.parentID, "a dispatch is a child of the enqueue")
		}
	}
	require.Equal(t, agent.TraceID().String(), op.TraceID())
}
