package dispatch

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/internal/tracing"
)

// Tracing: each dispatch attempt, in whatever process, is a child of the trace context
// the op was created under (its enqueue's span), and so is every status change
// (internal/opstate). With tracing off (Deps.Tracer nil) none of this runs.

// startDispatch starts the span of one dispatch attempt of op, a child of the op's
// stored trace context (or of ctx's span, when the job has one, linked to the op's).
// The op's log lines name it from then on.
func (d *Dispatcher) startDispatch(ctx context.Context, op *opRow, attempt int) (context.Context, trace.Span) {
	if d.deps.Tracer == nil {
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
	ctx, span := d.deps.Tracer.Start(tracing.ContextWithRemote(ctx, op.TraceParent), "oncebox.dispatch", opts...)
	op.actingTrace = tracing.Traceparent(span.SpanContext())
	return ctx, span
}

// startVendorCall starts the span of the vendor request itself; a vendor that accepts
// it sends its context on (traceparent).
func (d *Dispatcher) startVendorCall(ctx context.Context, vendor string) (context.Context, trace.Span) {
	if d.deps.Tracer == nil {
		return ctx, nil
	}
	return d.deps.Tracer.Start(ctx, "oncebox.vendor "+vendor, trace.WithSpanKind(trace.SpanKindClient),
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
