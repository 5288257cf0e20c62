-- The audit log's stream to a SIEM (issue 47, docs/audit.md "Streaming to a SIEM"): per
-- tenant, the last sealed entry exported as an OpenTelemetry log record. The streamer
-- (audit.Streamer, periodic role, --audit-otel-logs) moves it forward only after the
-- exporter accepted every record up to it, so a crash or a refused export resends from
-- here: delivery is at least once, and a SIEM dedupes by tenant and seq.
--
-- Expand-only: a new table. Older binaries neither read nor write it.
CREATE TABLE IF NOT EXISTS oncebox_audit_stream (
    tenant_id   bigint      PRIMARY KEY,
    tx          xid8        NOT NULL,
    seq         bigint      NOT NULL,
    entries     bigint      NOT NULL DEFAULT 0,
    exported_at timestamptz NOT NULL DEFAULT now()
);
