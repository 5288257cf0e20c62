-- The vendor references of ops, in a narrow table of their own, so that oncebox_op's
-- dispatch update can become HOT (issue 46): an update that changes no indexed column
-- writes no index entries, and oncebox_op_vendor_ref (migration 023) indexes vendor_ref,
-- which a recorded dispatch sets. oncebox reads references through this table from
-- v0.2.0 on: whether an object is a tenant's (outbox.checkObject: typed = false only,
-- migration 028), the support lookup, and the payment a refund names. v0.3.0 drops
-- oncebox_op_vendor_ref.
--
-- One row per op whose vendor_ref is set, mirroring (tenant_id, vendor, vendor_ref,
-- vendor_ref_typed). The primary key leads with (tenant_id, vendor_ref): it serves the
-- lookups by tenant and reference with or without the vendor (all equalities), so one
-- index is written per reference, not two. Two ops may record one reference (op_id in the
-- key).
--
-- Triggers on oncebox_op keep it, whatever binary writes the op: v0.1.0 processes, which
-- write only oncebox_op.vendor_ref, keep it complete during the rolling upgrade. The
-- update trigger fires only when the mirrored columns change (a dispatch that leaves the
-- reference as it was costs nothing here); a reference that changes (a person's
-- resolution typing another one) or goes replaces the op's row; the op's old row is
-- deleted first, so the insert needs no ON CONFLICT (whose speculative insert writes a
-- second WAL record per row, about 50 B, measured). A deleted op's row goes
-- with it (the purge keeps the object of an op it deletes in oncebox_tenant_object, as
-- before). No foreign key: its check would lock the op's row again (migration 027).
--
-- Expand-only: a new table and triggers, which v0.1.0 never reads. The backfill is one
-- INSERT ... SELECT, not batched: it runs in the migration's transaction after the
-- triggers are created, and CREATE TRIGGER's lock (SHARE ROW EXCLUSIVE) waits for every
-- transaction writing oncebox_op and holds off new ones until the migration commits, so
-- no reference is written between the backfill's read and the triggers. It reads the
-- ops with a reference once, and writes to oncebox_op wait that long (measured: 4.9 s
-- for 300,000 ops with a reference on a shared 2-core test machine).
--
-- Cost: a dispatch that records a reference inserts one row here, about 95 B of heap WAL
-- and 111 B of primary key (BenchmarkWAL's dispatch), against the 88 B entry of
-- oncebox_op_vendor_ref that v0.3.0 drops: what it buys is one index
-- fewer on a column a dispatch changes, which a HOT update of the op row needs (a HOT
-- update writes none of oncebox_op's index entries).
CREATE TABLE IF NOT EXISTS oncebox_op_ref (
    tenant_id  bigint  NOT NULL,
    vendor_ref text    NOT NULL,
    vendor     text    NOT NULL,
    op_id      uuid    NOT NULL,
    -- typed: the reference was typed by a person (oncebox_op.vendor_ref_typed), a claim
    -- that never makes the object the tenant's.
    typed      boolean NOT NULL,
    PRIMARY KEY (tenant_id, vendor_ref, vendor, op_id)
);

CREATE OR REPLACE FUNCTION oncebox_op_ref_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.vendor_ref IS NOT NULL THEN
        DELETE FROM oncebox_op_ref
        WHERE tenant_id = OLD.tenant_id AND vendor_ref = OLD.vendor_ref AND vendor = OLD.vendor AND op_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.vendor_ref IS NOT NULL THEN
        INSERT INTO oncebox_op_ref (tenant_id, vendor_ref, vendor, op_id, typed)
        VALUES (NEW.tenant_id, NEW.vendor_ref, NEW.vendor, NEW.id, NEW.vendor_ref_typed);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_op_ref_insert AFTER INSERT ON oncebox_op
    FOR EACH ROW WHEN (NEW.vendor_ref IS NOT NULL)
    EXECUTE FUNCTION oncebox_op_ref_sync();
CREATE OR REPLACE TRIGGER oncebox_op_ref_update AFTER UPDATE OF vendor_ref, vendor_ref_typed, tenant_id, vendor ON oncebox_op
    FOR EACH ROW WHEN ((NEW.vendor_ref, NEW.vendor_ref_typed, NEW.tenant_id, NEW.vendor)
        IS DISTINCT FROM (OLD.vendor_ref, OLD.vendor_ref_typed, OLD.tenant_id, OLD.vendor))
    EXECUTE FUNCTION oncebox_op_ref_sync();
CREATE OR REPLACE TRIGGER oncebox_op_ref_delete AFTER DELETE ON oncebox_op
    FOR EACH ROW WHEN (OLD.vendor_ref IS NOT NULL)
    EXECUTE FUNCTION oncebox_op_ref_sync();

INSERT INTO oncebox_op_ref (tenant_id, vendor_ref, vendor, op_id, typed)
SELECT tenant_id, vendor_ref, vendor, id, vendor_ref_typed FROM oncebox_op WHERE vendor_ref IS NOT NULL
ON CONFLICT DO NOTHING;
