-- The installation's own vendor account claimed by its only tenant (`oncebox tenant vendor
-- own --tenant T stripe`): while T is the installation's only tenant, the objects in the
-- installation's account (ops sent without a tenant setting of their own) are T's without
-- adoption (outbox.checkObject, docs/approvals-and-budgets.md#objects-a-tenant-may-act-on).
-- One row per vendor, with who claimed it and when. The claim counts only while exactly one
-- tenant exists: a second tenant ends it without a write.
-- Expand-only: a new table, which v0.1.0 never reads or writes (it keeps asking for
-- adoption, as before), so v0.1.0 keeps running on this schema during a rolling upgrade.
CREATE TABLE IF NOT EXISTS oncebox_vendor_owner (
    vendor    text        PRIMARY KEY,
    tenant_id bigint      NOT NULL REFERENCES oncebox_tenant (id) ON DELETE CASCADE,
    owned_at  timestamptz NOT NULL DEFAULT now(),
    owned_by  text        NOT NULL
);
