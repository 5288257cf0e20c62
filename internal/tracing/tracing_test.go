package tracing

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestEnabledOnlyWithAnExporter: tracing is off unless the environment names an exporter
// or an OTLP endpoint, and OTEL_SDK_DISABLED wins.
func TestEnabledOnlyWithAnExporter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
	} {
		require.Equal(t, c.want, Enabled(env(c.env)), "%v", c.env)
	}
	// Logs (the audit log's stream) follow the same rule with their own variables.
	for _, c := range []struct {
		env       map[string]string
		want, off bool
	}{
		{nil, false, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, false, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, false, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://c:4318/v1/logs"}, true, false},
		{map[string]string{"OTEL_LOGS_EXPORTER": "console"}, true, false},
		{map[string]string{"OTEL_LOGS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false, true},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_LOGS_EXPORTER": "otlp"}, false, true},
	} {
		require.Equal(t, c.want, LogsEnabled(env(c.env)), "%v", c.env)
		require.Equal(t, c.off, LogsOff(env(c.env)), "%v", c.env)
	}
	tp, shutdown, err := Setup(context.Background(), env(nil))
	require.NoError(t, err)
	require.Nil(t, tp, "off: no provider")
	require.NoError(t, shutdown(context.Background()))
}

// TestTraceparentRoundTrip: a stored traceparent reads back as the same span context,
// and anything else as none.
func TestTraceparentRoundTrip(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc := Parse(tp)
	require.True(t, sc.IsValid())
	require.Equal(t, tp, Traceparent(sc))
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", TraceID(tp))
	require.Equal(t, []any{"trace_id", "4bf92f3577b34da6a3ce929d0e0e4736", "span_id", "00f067aa0ba902b7"}, flat(LogAttrs(tp)))
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		require.False(t, Parse(bad).IsValid(), bad)
		require.Empty(t, TraceID(bad))
		require.Empty(t, LogAttrs(bad))
	}
	require.Equal(t, tp, Current(FromValues(context.Background(), tp, "")))
}

func flat(attrs []any) []any {
	var out []any
	for _, a := range attrs {
		attr := a.(slog.Attr)
		out = append(out, attr.Key, attr.Value.String())
	}
	return out
}
