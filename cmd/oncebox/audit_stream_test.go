package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/testlog"
)

// TestAuditOTelLogsNeedsTheFlagAndAnExporter: the flag alone (no log exporter in the
// environment) refuses to start with what to set; the variables alone stream nothing;
// OTEL_SDK_DISABLED turns the stream off with a warning; a process without the periodic
// role builds no exporter.
func TestAuditOTelLogsNeedsTheFlagAndAnExporter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	endpoint := map[string]string{"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://127.0.0.1:4318/v1/logs"}
	periodic := server.Roles{Periodic: true}

	cfg := server.Config{Roles: periodic}
	require.NoError(t, setupAuditLogs(ctx, &cfg, slog.New(slog.DiscardHandler), env(endpoint)))
	require.Nil(t, cfg.AuditLogExporter, "the variables alone ship nothing")

	cfg = server.Config{Roles: periodic, AuditOTelLogs: true}
	err := setupAuditLogs(ctx, &cfg, slog.New(slog.DiscardHandler), env(nil))
	require.EqualError(t, err, "--audit-otel-logs needs a log exporter: set OTEL_EXPORTER_OTLP_LOGS_ENDPOINT (or OTEL_EXPORTER_OTLP_ENDPOINT) to your collector, or OTEL_LOGS_EXPORTER=console")

	var logs testlog.Buffer
	cfg = server.Config{Roles: periodic, AuditOTelLogs: true}
	require.NoError(t, setupAuditLogs(ctx, &cfg, slog.New(slog.NewTextHandler(&logs, nil)),
		env(map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://c:4318/v1/logs"})))
	require.Nil(t, cfg.AuditLogExporter)
	require.Contains(t, logs.String(), "the audit log is not streamed")

	cfg = server.Config{Roles: server.Roles{API: true, Worker: true}, AuditOTelLogs: true}
	require.NoError(t, setupAuditLogs(ctx, &cfg, slog.New(slog.DiscardHandler), env(nil)))
	require.Nil(t, cfg.AuditLogExporter, "only the periodic role streams")

	cfg = server.Config{Roles: periodic, AuditOTelLogs: true}
	require.NoError(t, setupAuditLogs(ctx, &cfg, slog.New(slog.DiscardHandler), env(endpoint)))
	require.NotNil(t, cfg.AuditLogExporter)
	require.NotNil(t, cfg.AuditLogResource)
	require.NoError(t, cfg.AuditLogExporter.Shutdown(ctx))
}

// otlpLogs is an OTLP/HTTP logs receiver (POST /v1/logs, protobuf) that keeps each
// record's kind and tenant name.
type otlpLogs struct {
	mu      sync.Mutex
	records []map[string]string
}

func (c *otlpLogs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	req := &collogs.ExportLogsServiceRequest{}
	if err != nil || r.URL.Path != "/v1/logs" || proto.Unmarshal(body, req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rl := range req.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				m := map[string]string{"body": lr.GetBody().GetStringValue()}
				for _, kv := range lr.Attributes {
					m[kv.Key] = kv.Value.GetStringValue()
				}
				c.records = append(c.records, m)
			}
		}
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
	_, _ = w.Write(out)
}

// TestServeStreamsTheAuditLog: a real `oncebox serve --roles periodic --audit-otel-logs=true`
// seals a tenant's entries and sends them to the collector OTEL_EXPORTER_OTLP_LOGS_ENDPOINT
// names.
func TestServeStreamsTheAuditLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a serve process")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	collector := &otlpLogs{}
	otlp := httptest.NewServer(collector)
	t.Cleanup(otlp.Close)

	startChild(t, "serve --roles periodic --audit-otel-logs=true --audit-otel-logs-interval 100ms",
		"DATABASE_URL="+dbtest.ConnString(t, pool), "STRIPE_API_KEY=", "SENDGRID_API_KEY=",
		"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT="+otlp.URL+"/v1/logs", "OTEL_EXPORTER_OTLP_ENDPOINT=",
		"OTEL_LOGS_EXPORTER=", "OTEL_TRACES_EXPORTER=", "OTEL_SDK_DISABLED=")
	var got []map[string]string
	require.Eventually(t, func() bool {
		collector.mu.Lock()
		defer collector.mu.Unlock()
		got = append(got[:0], collector.records...)
		return len(got) >= 2
	}, 60*time.Second, 100*time.Millisecond, "no audit record reached the collector")
	require.Equal(t, "acme", got[0][audit.AttrTenantName])
	require.Equal(t, "setting oncebox_tenant: insert", got[0]["body"])
	require.Equal(t, "setting oncebox_api_token: insert", got[1]["body"])
	for _, r := range got {
		for _, v := range r {
			require.False(t, strings.Contains(v, token), "a token in an exported record")
		}
	}
}
