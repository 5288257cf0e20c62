-- Objects a tenant may act on (outbox.Tool.Objects): an op that names an existing object,
-- such as the payment a refund acts on, is admitted only if one of the tenant's ops made
-- it (its vendor_ref, found by the index below), the tenant adopted it (a row here:
-- `oncebox tenant adopt`, or the TTL purge keeping the object of an op it deletes), or
-- the vendor has it tagged with one of the tenant's ops.
-- Expand-only: an index and a new table, which v0.1.0 never reads.
CREATE INDEX IF NOT EXISTS oncebox_op_vendor_ref ON oncebox_op (tenant_id, vendor, vendor_ref)
    WHERE vendor_ref IS NOT NULL;
CREATE TABLE IF NOT EXISTS oncebox_tenant_object (
    tenant_id  bigint      NOT NULL REFERENCES oncebox_tenant (id) ON DELETE CASCADE,
    vendor     text        NOT NULL,
    object_id  text        NOT NULL,
    adopted_at timestamptz NOT NULL DEFAULT now(),
    adopted_by text        NOT NULL,
    PRIMARY KEY (tenant_id, vendor, object_id)
);
