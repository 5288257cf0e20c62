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

// startDispatch starts the span of one dispatch attempt of op, a child of the op's
// stored trace context (or of ctx's span, when the job has one, linked to the op's).
// The op's log lines name it from then on.
func (ob *Outbox) startDispatch(ctx context.Context, op *Op, attempt int) (context.Context, trace.Span) {
	if ob.tracer == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(
		tracing.AttrTenant.Int64(op.TenantID), tracing.AttrOpID.String(op.ID), tracing.AttrKey.String(op.Key),
		tracing.AttrTool.String(op.Tool), tracing.AttrVendor.String(op.Vendor),
		tracing.AttrConversationID.String(op.ConversationID), tracing.AttrToolCallID.String(op.ToolCallID),
		tracing.AttrAttempt.Int(attempt))}
	if stored := tracing.Parse(op.TraceParent); stored.IsValid() && trace.SpanContextFromContext(ctx).IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: stored}))
	}
	ctx, span := ob.tracer.Start(tracing.ContextWithRemote(ctx, op.TraceParent), "oncebox.dispatch", opts...)
	op.actingTrace = tracing.Traceparent(span.SpanContext())
	return ctx, span
}

// startVendorCall starts the span of the vendor request itself; a vendor that accepts
// it sends its context on (traceparent).
func (ob *Outbox) startVendorCall(ctx context.Context, vendor string) (context.Context, trace.Span) {
	if ob.tracer == nil {
		return ctx, nil
	}
	return ob.tracer.Start(ctx, "oncebox.vendor "+vendor, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.AttrVendor.String(vendor)))
}

// endSpan ends span (nil when tracing is off) with the attempt's outcome class and
// vendor reference.
func endSpan(span trace.Span, outcome, vendorRef string, err error) {
	if span == nil {
		return
	}
	if outcome != "" {
		span.SetAttributes(tracing.AttrOutcome.String(outcome))
	}
	if vendorRef != "" {
		span.SetAttributes(tracing.AttrVendorRef.String(vendorRef))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
