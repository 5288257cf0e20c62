package outbox

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/internal/tracing"
)

// Tracing: an enqueue's span is a child of the caller's trace context; the op stores
// the enqueue's (Op.TraceParent), and each dispatch attempt, in whatever process, is a
// child of it, as is every status change (internal/opstate). With tracing off
// (Config.TracerProvider nil) none of this runs, but the op still stores the caller's
// trace context, so that its trace id is found from its key.

// TraceID returns the trace id of the op's stored trace context ("" if none).
func (op *Op) TraceID() string { return tracing.TraceID(op.TraceParent) }

// logTrace is the trace context the op's log lines name: the span acting on it, if
// any, or the one it was created under.
func (op *Op) logTrace() string {
	if op.actingTrace != "" {
		return op.actingTrace
	}
	return op.TraceParent
}

// startEnqueue starts an enqueue's span (a no-op span when tracing is off).
func (ob *Outbox) startEnqueue(ctx context.Context, p EnqueueParams) (context.Context, trace.Span) {
	if ob.tracer == nil {
		return ctx, nil
	}
	return ob.tracer.Start(ctx, "oncebox.enqueue", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		tracing.AttrTenant.Int64(p.TenantID), tracing.AttrKey.String(p.Key), tracing.AttrTool.String(p.Tool),
		tracing.AttrConversationID.String(p.ConversationID), tracing.AttrToolCallID.String(p.ToolCallID)))
}

// endEnqueue ends an enqueue's span with its result: new, replay or conflict.
func endEnqueue(span trace.Span, res *EnqueueResult, err error) {
	if span == nil {
		return
	}
	defer span.End()
	var kc *KeyConflictError
	switch {
	case errors.As(err, &kc):
		span.SetAttributes(tracing.AttrResult.String("conflict"))
	case err != nil:
		span.SetAttributes(tracing.AttrResult.String("error"))
		span.SetStatus(codes.Error, err.Error())
	case res.Replayed:
		span.SetAttributes(tracing.AttrResult.String("replay"))
	default:
		span.SetAttributes(tracing.AttrResult.String("new"))
	}
	if res != nil && res.Op != nil {
		span.SetAttributes(tracing.AttrOpID.String(res.Op.ID), tracing.AttrVendor.String(res.Op.Vendor),
			tracing.AttrStatus.String(string(res.Op.Status)), tracing.AttrAttempt.Int(res.Op.Attempts))
	}
}
