-- The audit log (issue 47, docs/audit.md): one append-only row per fact about an op or a
-- setting, written by triggers in the transaction of the change it records, so that every
-- writer records it (this release, the previous one during a rolling upgrade, SQL by hand).
-- The TTL purge never deletes it: its retention is its own (--audit-retention), by whole
-- monthly partitions. Entries stay narrow (ids, hashes, short fields; never the payload:
-- its fingerprint stands for it, nor a secret).
--
-- The chain: the sealer (outbox's audit sealer, leader only) gives each entry, in (tx,
-- seq) order per tenant, prev_hash and hash = sha256(prev_hash || canonical entry), but
-- only entries whose transaction is older than every transaction still in progress
-- (tx < pg_snapshot_xmin(pg_current_snapshot())): an entry that appears later always has
-- a larger tx, so a sealed prefix never gets an entry inserted before its end.
-- tenant_id 0 is the installation (its stored policies).
--
-- Expand-only: new tables, functions and triggers, a nullable column, and the token role
-- check widened with 'auditor'. v0.1.0 neither reads nor writes them; its writes are
-- recorded by the triggers all the same.
ALTER TABLE oncebox_op ADD COLUMN IF NOT EXISTS asked_by_token bigint;

ALTER TABLE oncebox_api_token DROP CONSTRAINT IF EXISTS oncebox_api_token_role_check;
ALTER TABLE oncebox_api_token ADD CONSTRAINT oncebox_api_token_role_check
    CHECK (role IN ('agent', 'approver', 'admin', 'operator', 'auditor'));

CREATE SEQUENCE IF NOT EXISTS oncebox_audit_seq;

CREATE TABLE IF NOT EXISTS oncebox_audit (
    tenant_id bigint      NOT NULL,
    seq       bigint      NOT NULL DEFAULT nextval('oncebox_audit_seq'),
    tx        xid8        NOT NULL DEFAULT pg_current_xact_id(),
    at        timestamptz NOT NULL DEFAULT now(),
    kind      text        NOT NULL,
    op_id     uuid,
    fp        bytea,
    e         jsonb       NOT NULL,
    prev_hash bytea,
    hash      bytea
) PARTITION BY RANGE (at);

CREATE INDEX IF NOT EXISTS oncebox_audit_chain ON oncebox_audit (tenant_id, tx, seq);

-- No insert ever fails for want of a partition; the sealer creates the months ahead.
CREATE TABLE IF NOT EXISTS oncebox_audit_default PARTITION OF oncebox_audit DEFAULT;

-- oncebox_audit_partition creates the month of t's partition unless it exists.
CREATE OR REPLACE FUNCTION oncebox_audit_partition(t timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    m date := date_trunc('month', t AT TIME ZONE 'UTC')::date;
    name text := 'oncebox_audit_' || to_char(m, 'YYYYMM');
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF oncebox_audit FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 80)',
        name, (m::timestamp AT TIME ZONE 'UTC'), ((m + interval '1 month')::timestamp AT TIME ZONE 'UTC'));
END
$$;

SELECT oncebox_audit_partition(now() + make_interval(months => i)) FROM generate_series(0, 2) AS i;

-- The sealer's state per tenant: the last sealed entry and its hash.
CREATE TABLE IF NOT EXISTS oncebox_audit_head (
    tenant_id bigint      PRIMARY KEY,
    tx        xid8        NOT NULL,
    seq       bigint      NOT NULL,
    hash      bytea       NOT NULL,
    entries   bigint      NOT NULL,
    sealed_at timestamptz NOT NULL DEFAULT now()
);

-- Checkpoints: a tenant's head as it was, signed with the operator's ed25519 key
-- (signature NULL: no key was configured, the checkpoint is unsigned).
CREATE TABLE IF NOT EXISTS oncebox_audit_checkpoint (
    tenant_id  bigint      NOT NULL,
    seq        bigint      NOT NULL,
    tx         xid8        NOT NULL,
    entries    bigint      NOT NULL,
    head_hash  bytea       NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    public_key bytea,
    signature  bytea,
    PRIMARY KEY (tenant_id, entries)
);

-- An op: its call (inserted; its fingerprint in fp), every status change but the claim
-- of a dispatch (pending to dispatching: the dispatch's outcome, or its cut to unknown,
-- follows with the attempt count; the previous status is the entry before), and an op withdrawn before it was
-- anything (a call the gate refused is inserted and deleted in one transaction; the purge
-- deletes only terminal ops and records nothing). The args are not copied: the
-- fingerprint stands for them; amount and currency are kept where the args have them.
CREATE OR REPLACE FUNCTION oncebox_audit_op() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO oncebox_audit (tenant_id, kind, op_id, fp, e) VALUES (NEW.tenant_id, 'call', NEW.id, NEW.fingerprint, jsonb_strip_nulls(jsonb_build_object(
            'key', NEW.idempotency_key, 'tool', NEW.tool, 'vendor', NEW.vendor,
            'held', CASE WHEN NEW.status <> 'pending' THEN NEW.status END, 'token', NEW.asked_by_token,
            'person', (SELECT t.person FROM oncebox_api_token t WHERE t.id = NEW.asked_by_token),
            'conversation', NEW.conversation_id, 'tool_call', NEW.tool_call_id, 'trace', NEW.trace_parent,
            'account', nullif(NEW.vendor_account, ''), 'amount', NEW.args -> 'amount', 'currency', NEW.args -> 'currency',
            'sealed', CASE WHEN NEW.sealed_args IS NOT NULL THEN true END)));
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO oncebox_audit (tenant_id, kind, op_id, e) VALUES (NEW.tenant_id, 'status', NEW.id, jsonb_strip_nulls(jsonb_build_object(
            'to', NEW.status, 'attempts', NEW.attempts,
            'vendor_ref', NEW.vendor_ref, 'typed', CASE WHEN NEW.vendor_ref_typed THEN true END,
            'amount', CASE WHEN NEW.vendor_ref IS NOT NULL THEN NEW.result -> 'amount' END,
            'currency', CASE WHEN NEW.vendor_ref IS NOT NULL THEN NEW.result -> 'currency' END,
            'error', NEW.error -> 'code')));
    ELSIF OLD.status NOT IN ('succeeded', 'failed', 'rejected') THEN
        INSERT INTO oncebox_audit (tenant_id, kind, op_id, e) VALUES (OLD.tenant_id, 'withdrawn', OLD.id,
            jsonb_build_object('status', OLD.status));
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_audit_op_insert AFTER INSERT ON oncebox_op
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_op();
CREATE OR REPLACE TRIGGER oncebox_audit_op_status AFTER UPDATE OF status ON oncebox_op
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status AND NOT (OLD.status = 'pending' AND NEW.status = 'dispatching'))
    EXECUTE FUNCTION oncebox_audit_op();
CREATE OR REPLACE TRIGGER oncebox_audit_op_delete AFTER DELETE ON oncebox_op
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_op();

-- An op's events: approvals, rejections, resolutions, reconcile decisions, with who took
-- them (actor) and why (detail, as the event stores it: no secret).
CREATE OR REPLACE FUNCTION oncebox_audit_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncebox_audit (tenant_id, kind, op_id, e)
    SELECT o.tenant_id, 'event', NEW.op_id, jsonb_strip_nulls(jsonb_build_object('event', NEW.kind,
        'from', NEW.from_status, 'to', NEW.to_status, 'actor', NEW.actor, 'detail', NEW.detail))
    FROM oncebox_op o WHERE o.id = NEW.op_id;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_audit_event AFTER INSERT ON oncebox_op_event
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_event();

-- An approval request: the policy version it is bound to, why, how many approvers.
CREATE OR REPLACE FUNCTION oncebox_audit_approval() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncebox_audit (tenant_id, kind, op_id, e) VALUES (NEW.tenant_id, 'approval_requested', NEW.op_id,
        jsonb_strip_nulls(jsonb_build_object('policy_version', NEW.policy_version, 'why', NEW.why,
            'approvers_needed', NEW.approvers_needed, 'token', NEW.requested_by_token, 'budget', NEW.budget,
            'expires_at', NEW.expires_at)));
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_audit_approval AFTER INSERT ON oncebox_approval
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_approval();

-- A setting changed: the table, the operation and the row, minus the columns named in
-- the trigger's arguments (secrets: a token's hash, a sealed vendor key).
CREATE OR REPLACE FUNCTION oncebox_audit_setting() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r jsonb := CASE WHEN TG_OP = 'DELETE' THEN to_jsonb(OLD) ELSE to_jsonb(NEW) END;
    tenant bigint;
BEGIN
    IF TG_NARGS > 0 THEN
        r := r - TG_ARGV;
    END IF;
    IF TG_TABLE_NAME = 'oncebox_tenant' THEN
        tenant := r ->> 'id';
    ELSE
        tenant := coalesce((r ->> 'tenant_id')::bigint, 0);
    END IF;
    IF TG_TABLE_NAME = 'oncebox_tenant_object' AND r ->> 'adopted_by' LIKE 'purge of op %' THEN
        RETURN NULL; -- the purge keeps a purged op's object: not an adoption
    END IF;
    INSERT INTO oncebox_audit (tenant_id, kind, e)
    VALUES (tenant, 'setting', jsonb_build_object('table', TG_TABLE_NAME, 'op', lower(TG_OP), 'row', r));
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_audit_setting AFTER INSERT OR UPDATE OR DELETE ON oncebox_tenant
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_setting();
CREATE OR REPLACE TRIGGER oncebox_audit_setting AFTER INSERT OR UPDATE OR DELETE ON oncebox_api_token
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_setting('token_hash');
CREATE OR REPLACE TRIGGER oncebox_audit_setting AFTER INSERT OR UPDATE OR DELETE ON oncebox_approval_policy
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_setting();
CREATE OR REPLACE TRIGGER oncebox_audit_setting AFTER INSERT OR UPDATE OR DELETE ON oncebox_tenant_budget
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_setting();
CREATE OR REPLACE TRIGGER oncebox_audit_setting AFTER INSERT OR UPDATE OR DELETE ON oncebox_installation_policy
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_setting();
CREATE OR REPLACE TRIGGER oncebox_audit_setting AFTER INSERT OR UPDATE OR DELETE ON oncebox_tenant_vendor
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_setting();
CREATE OR REPLACE TRIGGER oncebox_audit_setting AFTER INSERT OR DELETE ON oncebox_tenant_vendor_key
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_setting('sealed');
CREATE OR REPLACE TRIGGER oncebox_audit_setting AFTER INSERT OR DELETE ON oncebox_tenant_object
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_setting();
CREATE OR REPLACE TRIGGER oncebox_audit_setting AFTER INSERT OR DELETE ON oncebox_vendor_owner
    FOR EACH ROW EXECUTE FUNCTION oncebox_audit_setting();
