// Package tracing sets up OpenTelemetry tracing from the standard OTEL_* environment
// variables and carries an op's trace context between processes as a W3C traceparent.
//
// Tracing is off (a no-op TracerProvider, nothing exported, nothing sampled) unless an
// exporter is configured: OTEL_TRACES_EXPORTER (otlp, console; "none" is off), or an
// OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
// OTEL_SDK_DISABLED=true turns it off whatever else is set. The exporter is chosen by
// go.opentelemetry.io/contrib/exporters/autoexport (OTEL_EXPORTER_OTLP_PROTOCOL:
// http/protobuf, the default, or grpc); the sampler (OTEL_TRACES_SAMPLER), the batch
// processor (OTEL_BSP_*) and the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES)
// by the SDK.
//
// Logs follow the same rule with their own variables (OTEL_LOGS_EXPORTER,
// OTEL_EXPORTER_OTLP_LOGS_ENDPOINT): LogsEnabled and LogExporter, for the audit log's
// stream to a SIEM, which --audit-otel-logs turns on.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of oncebox's spans.
const ScopeName = "github.com/oncebox/oncebox"

// Enabled reports whether the environment (getenv) configures a trace exporter.
func Enabled(getenv func(string) string) bool { return signalEnabled(getenv, "TRACES") }

// LogsEnabled reports whether the environment (getenv) configures a log exporter, by the
// same rule as traces: OTEL_LOGS_EXPORTER (otlp, console; "none" is off), or an OTLP
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_LOGS_ENDPOINT), unless
// OTEL_SDK_DISABLED=true. Only the audit log's stream exports logs (--audit-otel-logs).
func LogsEnabled(getenv func(string) string) bool { return signalEnabled(getenv, "LOGS") }

// LogsOff reports whether the environment turns OpenTelemetry logs off on purpose:
// OTEL_SDK_DISABLED=true or OTEL_LOGS_EXPORTER=none.
func LogsOff(getenv func(string) string) bool {
	return sdkDisabled(getenv) || strings.EqualFold(strings.TrimSpace(getenv("OTEL_LOGS_EXPORTER")), "none")
}

func sdkDisabled(getenv func(string) string) bool {
	return strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true")
}

// signalEnabled is Enabled for the signal (TRACES, LOGS).
func signalEnabled(getenv func(string) string, signal string) bool {
	if sdkDisabled(getenv) {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(getenv("OTEL_" + signal + "_EXPORTER"))) {
	case "none":
		return false
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
	default:
		return true
	}
}

// LogExporter returns the log exporter the environment configures
// (autoexport.NewLogExporter: OTEL_LOGS_EXPORTER, OTEL_EXPORTER_OTLP_(LOGS_)PROTOCOL,
// OTEL_EXPORTER_OTLP_(LOGS_)ENDPOINT, _HEADERS, _TIMEOUT), and the resource of its records.
func LogExporter(ctx context.Context) (sdklog.Exporter, *resource.Resource, error) {
	exp, err := autoexport.NewLogExporter(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("otel logs: exporter: %w", err)
	}
	res, err := newResource(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("otel logs: resource: %w", err)
	}
	return exp, res, nil
}

// newResource is this process as telemetry names it: service.name oncebox unless the
// environment (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) says otherwise.
func newResource(ctx context.Context) (*resource.Resource, error) {
	return resource.New(ctx, resource.WithAttributes(semconv.ServiceName("oncebox")), resource.WithTelemetrySDK(),
		resource.WithFromEnv())
}

// Setup returns the TracerProvider the environment configures and a function that
// flushes and stops it. When tracing is off it returns a nil provider (oncebox's
// packages then trace nothing, at no cost) and a shutdown that does nothing.
func Setup(ctx context.Context, getenv func(string) string) (trace.TracerProvider, func(context.Context) error, error) {
	if !Enabled(getenv) {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	res, err := newResource(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// Propagator is how oncebox reads and writes trace context: W3C traceparent and
// tracestate.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// Traceparent returns sc as a W3C traceparent header value ("" when sc is not valid).
func Traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// Parse reads a W3C traceparent; the zero SpanContext when tp is not one.
func Parse(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := Propagator().Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

// ContextWithRemote returns ctx with the traceparent tp as its remote parent span
// context (ctx unchanged when tp is not one, or ctx already has a valid span).
func ContextWithRemote(ctx context.Context, tp string) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	sc := Parse(tp)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Current returns the traceparent of ctx's span, or of its remote parent ("" if none).
func Current(ctx context.Context) string {
	return Traceparent(trace.SpanContextFromContext(ctx))
}

// LogAttrs are the trace_id and span_id of the traceparent tp, for a log line (none when
// tp is empty).
func LogAttrs(tp string) []any {
	sc := Parse(tp)
	if !sc.IsValid() {
		return nil
	}
	return []any{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
}

// TraceID returns the trace id of the traceparent tp ("" if none).
func TraceID(tp string) string {
	sc := Parse(tp)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Attribute keys of oncebox's spans.
const (
	AttrTenant         = attribute.Key("oncebox.tenant")
	AttrOpID           = attribute.Key("oncebox.op_id")
	AttrKey            = attribute.Key("oncebox.idempotency_key")
	AttrTool           = attribute.Key("oncebox.tool")
	AttrVendor         = attribute.Key("oncebox.vendor")
	AttrConversationID = attribute.Key("oncebox.conversation_id")
	AttrToolCallID     = attribute.Key("oncebox.tool_call_id")
	AttrAttempt        = attribute.Key("oncebox.attempt")
	AttrResult         = attribute.Key("oncebox.result")
	AttrOutcome        = attribute.Key("oncebox.outcome")
	AttrVendorRef      = attribute.Key("oncebox.vendor_ref")
	AttrStatus         = attribute.Key("oncebox.status")
)

// FromHeader returns ctx with the trace context of the request headers h (traceparent,
// tracestate) as its remote parent; ctx unchanged when h carries none.
func FromHeader(ctx context.Context, h http.Header) context.Context {
	if h.Get("traceparent") == "" {
		return ctx
	}
	return Propagator().Extract(ctx, propagation.HeaderCarrier(h))
}

// FromValues returns ctx with the trace context traceparent, tracestate (an MCP call's
// _meta) as its remote parent; ctx unchanged when traceparent is empty or not one.
func FromValues(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return Propagator().Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
}

// SpanLogAttrs are the trace_id and span_id of ctx's span (or remote parent), for a log
// line about an op (none when ctx has no trace context).
func SpanLogAttrs(ctx context.Context) []any { return LogAttrs(Current(ctx)) }
