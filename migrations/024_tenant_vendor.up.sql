-- Vendor settings per tenant (outbox.VendorSettings, `oncebox tenant vendor`): a Stripe
-- Connect account the platform's key acts on, or the tenant's own secret key (a Stripe
-- key, a SendGrid subuser's key), over the installation's settings. A tenant with no row
-- uses the installation's.
-- account is what an op of the tenant records at enqueue (oncebox_op.vendor_account,
-- read by the op's insert itself): "acct_…" for a Connect account, "key:<fingerprint>"
-- for an own key. A key is stored only sealed with the installation's seal key, in
-- oncebox_tenant_vendor_key under its fingerprint, kept while an op may still need it,
-- so that an op keeps the credential it was accepted under after the setting changes.
-- Expand-only: new tables and a nullable column the previous release never reads.
CREATE TABLE IF NOT EXISTS oncebox_tenant_vendor (
    tenant_id  bigint      NOT NULL REFERENCES oncebox_tenant (id) ON DELETE CASCADE,
    vendor     text        NOT NULL,
    account    text        NOT NULL,
    key_hint   text,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text        NOT NULL,
    PRIMARY KEY (tenant_id, vendor)
);
CREATE INDEX IF NOT EXISTS oncebox_tenant_vendor_account ON oncebox_tenant_vendor (vendor, account);

CREATE TABLE IF NOT EXISTS oncebox_tenant_vendor_key (
    tenant_id   bigint      NOT NULL REFERENCES oncebox_tenant (id) ON DELETE CASCADE,
    vendor      text        NOT NULL,
    fingerprint text        NOT NULL,
    sealed      bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, vendor, fingerprint)
);

ALTER TABLE oncebox_op ADD COLUMN IF NOT EXISTS vendor_account text;

-- The Connect account a vendor event came from (its "account"), NULL for the platform's
-- own: an event counts for an op only when it comes from the account the op was
-- accepted under.
ALTER TABLE oncebox_vendor_event ADD COLUMN IF NOT EXISTS account text;
