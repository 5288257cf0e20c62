-- The two foreign keys checked on every op's hot path are replaced by what they did
-- that oncebox relies on:
--
-- * oncebox_op.tenant_id: its check took a KEY SHARE lock on the tenant's row at every
--   enqueue, so concurrent enqueues of one tenant created a MultiXact each (140 bytes of
--   WAL per enqueue, and MultiXact churn on one row). The enqueue reads the tenant's row
--   instead, without a lock (sqlEnqueue: an unknown tenant leaves tenant_id NULL, and
--   the insert fails as the check did); tenants are never deleted by oncebox.
-- * oncebox_attempt.op_id: its check locked the op's row again at every attempt insert,
--   in the statement that had just updated it. Every attempt is inserted by a statement
--   or transaction that holds its op's row.
--
-- Their cascades stay, as triggers: a tenant deleted by hand takes its ops with it, and
-- an op deleted (the purge, a refused op) takes its attempts. Expand-only: constraints
-- dropped narrow nothing a binary relies on, and v0.1.0's deletes cascade as before.
CREATE OR REPLACE FUNCTION oncebox_tenant_delete_ops() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM oncebox_op WHERE tenant_id = OLD.id;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_tenant_delete_ops AFTER DELETE ON oncebox_tenant
    FOR EACH ROW EXECUTE FUNCTION oncebox_tenant_delete_ops();

CREATE OR REPLACE FUNCTION oncebox_op_delete_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM oncebox_attempt WHERE op_id = OLD.id;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_op_delete_attempts AFTER DELETE ON oncebox_op
    FOR EACH ROW EXECUTE FUNCTION oncebox_op_delete_attempts();

ALTER TABLE oncebox_op DROP CONSTRAINT IF EXISTS oncebox_op_tenant_id_fkey;
ALTER TABLE oncebox_attempt DROP CONSTRAINT IF EXISTS oncebox_attempt_op_id_fkey;
