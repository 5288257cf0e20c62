-- The web console's sign-ins. A session is named by a random secret held in the
-- browser's cookie; only its SHA-256 is stored, so a copy of the table signs nobody in.
-- A session acts as the API token it was opened with: revoking the token ends it.
CREATE TABLE oncebox_console_session (
    id_hash    bytea       PRIMARY KEY,
    token_id   bigint      NOT NULL REFERENCES oncebox_api_token (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX oncebox_console_session_expires ON oncebox_console_session (expires_at);

-- One-time sign-in links (`oncebox dev` prints one): the SHA-256 of the link's code, the
-- token it signs in as, until when it may be used, and when it was (once).
CREATE TABLE oncebox_console_link (
    code_hash  bytea       PRIMARY KEY,
    token_id   bigint      NOT NULL REFERENCES oncebox_api_token (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
