-- oncebox schema, version 1: tenants, API tokens, ops, attempts, history, tombstones.

CREATE TABLE oncebox_tenant (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (char_length(name) BETWEEN 1 AND 100),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- API tokens are stored as SHA-256 hashes only; prefix is the first characters of the
-- token, kept so an operator can tell tokens apart when revoking one.
CREATE TABLE oncebox_api_token (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  bigint      NOT NULL REFERENCES oncebox_tenant (id) ON DELETE CASCADE,
    token_hash bytea       NOT NULL UNIQUE,
    prefix     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

CREATE TABLE oncebox_op (
    id                  uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id           bigint      NOT NULL REFERENCES oncebox_tenant (id) ON DELETE CASCADE,
    idempotency_key     text        NOT NULL,
    tool                text        NOT NULL,
    vendor              text        NOT NULL,
    args                jsonb       NOT NULL,
    fingerprint         bytea       NOT NULL,
    status              text        NOT NULL CHECK (status IN ('awaiting_approval', 'rejected', 'pending',
                                        'dispatching', 'succeeded', 'failed', 'unknown', 'needs_review')),
    attempts            integer     NOT NULL DEFAULT 0,
    attempt_token       uuid,
    generation          integer     NOT NULL DEFAULT 0,
    vendor_key          text        NOT NULL,
    -- key_first_sent_at is when the current vendor key was first sent: the start of the
    -- vendor's native idempotency window for it.
    key_first_sent_at   timestamptz,
    -- stale_key is set when the vendor answered the current key with a replayed stored failure.
    stale_key           boolean     NOT NULL DEFAULT false,
    vendor_ref          text,
    result              json,
    error               json,
    conversation_id     text,
    tool_call_id        text,
    dispatch_started_at timestamptz,
    next_check_at       timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz NOT NULL,
    CONSTRAINT oncebox_op_tenant_key UNIQUE (tenant_id, idempotency_key)
);

-- The reconciler's work list: small, partial.
CREATE INDEX oncebox_op_unresolved ON oncebox_op (status, next_check_at)
    WHERE status IN ('unknown', 'dispatching');
CREATE INDEX oncebox_op_expires_at ON oncebox_op (expires_at);
CREATE INDEX oncebox_op_review ON oncebox_op (tenant_id, updated_at) WHERE status = 'needs_review';
CREATE INDEX oncebox_op_created_at ON oncebox_op (created_at);

-- One row per dispatch attempt, so support can see the history of an op.
CREATE TABLE oncebox_attempt (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    op_id       uuid        NOT NULL REFERENCES oncebox_op (id) ON DELETE CASCADE,
    attempt     integer     NOT NULL,
    token       uuid        NOT NULL,
    vendor_key  text        NOT NULL,
    job_id      bigint,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    outcome     text,
    error       text,
    vendor_ref  text
);
CREATE INDEX oncebox_attempt_op ON oncebox_attempt (op_id, attempt);

-- Every decision taken about an op that is not a dispatch attempt: reconcile decisions,
-- approvals, manual resolutions, with what the vendor answered.
CREATE TABLE oncebox_op_event (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    op_id       uuid        NOT NULL REFERENCES oncebox_op (id) ON DELETE CASCADE,
    at          timestamptz NOT NULL DEFAULT now(),
    kind        text        NOT NULL,
    from_status text,
    to_status   text,
    actor       text,
    detail      jsonb
);
CREATE INDEX oncebox_op_event_op ON oncebox_op_event (op_id, id);

-- A tombstone keeps the key and fingerprint of a purged op for a while, so that a later
-- reuse of the key is counted as a key-expiry collision.
CREATE TABLE oncebox_tombstone (
    tenant_id       bigint      NOT NULL REFERENCES oncebox_tenant (id) ON DELETE CASCADE,
    idempotency_key text        NOT NULL,
    fingerprint     bytea       NOT NULL,
    expired_at      timestamptz NOT NULL DEFAULT now(),
    purge_after     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);
CREATE INDEX oncebox_tombstone_purge_after ON oncebox_tombstone (purge_after);
