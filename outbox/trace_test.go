package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestApprovalContinuesTheOpsTrace: an approval asked for in a trace of its own (the
// approver's request) is recorded as a span of the op's trace, the agent's, linked to
// the approver's span; a replay and a conflict are enqueue spans that say so.
func TestApprovalContinuesTheOpsTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(optest.MoneyTool())
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, TracerProvider: tp,
		Gate: newGate(t, pool, reg, governance.ApprovalPolicy{"test.money": {Mode: governance.ApprovalAlways}})})
	require.NoError(t, err)
	tenant := optest.Tenant(t, pool, "acme")

	agent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4}, TraceFlags: trace.FlagsSampled, Remote: true})
	approver := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9, 8, 7}, SpanID: trace.SpanID{6}, TraceFlags: trace.FlagsSampled, Remote: true})
	p := outbox.EnqueueParams{TenantID: tenant, Key: "pay-1", Tool: "test.money", Args: json.RawMessage(`{"amount": 5}`)}
	res, err := ob.Enqueue(trace.ContextWithRemoteSpanContext(ctx, agent), p)
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, res.Op.Status)
	require.Equal(t, agent.TraceID().String(), res.Op.TraceID())

	_, err = ob.Enqueue(ctx, p)
	require.NoError(t, err)
	p.Args = json.RawMessage(`{"amount": 6}`)
	_, err = ob.Enqueue(ctx, p)
	require.Error(t, err)
	var results []string
	for _, s := range rec.Ended() {
		if s.Name() == "oncebox.enqueue" {
			for _, kv := range s.Attributes() {
				if kv.Key == "oncebox.result" {
					results = append(results, kv.Value.AsString())
				}
			}
		}
	}
	require.Equal(t, []string{"new", "replay", "conflict"}, results)

	_, err = ob.Approve(trace.ContextWithRemoteSpanContext(ctx, approver), tenant, "pay-1", "person ann", "checked")
	require.NoError(t, err)
	var approval sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if s.Name() == "oncebox.transition" && kv.Key == "oncebox.to" && kv.Value.AsString() == "pending" {
				approval = s
			}
		}
	}
	require.NotNil(t, approval, "the approval is a span")
	require.Equal(t, agent.TraceID(), approval.SpanContext().TraceID(), "in the op's trace")
	require.Len(t, approval.Links(), 1)
	require.Equal(t, approver.TraceID(), approval.Links()[0].SpanContext.TraceID(), "linked to the approver's request")
}
