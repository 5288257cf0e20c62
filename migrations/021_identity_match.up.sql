-- Calls matched to an op by their tool's identity fields (outbox.Tool.Identity): an MCP
-- call whose key oncebox minted from the identity fields found an op under that key whose
-- other arguments differ, and was answered with that op instead of being executed. Each
-- row is one such call: the op it was matched to, when, the fingerprint of its whole
-- payload, the top-level arguments that differed (NULL when the op's stored arguments
-- are redacted and the comparison could not be made) and the conversation it came from.
-- Expand-only: a new table, which v0.1.0 never reads.
CREATE TABLE IF NOT EXISTS oncebox_identity_match (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    op_id           uuid        NOT NULL REFERENCES oncebox_op (id) ON DELETE CASCADE,
    tenant_id       bigint      NOT NULL,
    at              timestamptz NOT NULL DEFAULT now(),
    fingerprint     bytea       NOT NULL,
    differed        text[],
    conversation_id text,
    tool_call_id    text
);
CREATE INDEX IF NOT EXISTS oncebox_identity_match_op ON oncebox_identity_match (op_id, id);
