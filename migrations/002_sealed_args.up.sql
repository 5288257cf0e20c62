-- Arguments of tools with redaction: the args column holds only the redacted form, and
-- the full arguments wait here, encrypted (AES-256-GCM), until the op is terminal.
ALTER TABLE oncebox_op ADD COLUMN sealed_args bytea;
