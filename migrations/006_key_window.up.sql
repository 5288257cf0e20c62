-- Calls deduplicated by payload within a window (MCP calls that name no conversation):
-- identical calls of a tenant share one idempotency key until the window closes, from
-- whichever session or process they come. call_hash identifies the call (tool, payload
-- fingerprint, occurrence); idempotency_key is the key of the op they share.
-- IF NOT EXISTS: a development database that a branch migrated under another number
-- already holds the table.
CREATE TABLE IF NOT EXISTS oncebox_key_window (
    tenant_id       bigint      NOT NULL REFERENCES oncebox_tenant (id) ON DELETE CASCADE,
    call_hash       text        NOT NULL,
    idempotency_key text        NOT NULL,
    opened_at       timestamptz NOT NULL DEFAULT now(),
    closes_at       timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, call_hash)
);
CREATE INDEX IF NOT EXISTS oncebox_key_window_closes_at ON oncebox_key_window (closes_at);
