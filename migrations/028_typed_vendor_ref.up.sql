-- A vendor reference a person typed (a manual resolution's vendor_ref) is a claim, not
-- something a vendor or a target said: it never makes the object the tenant's
-- (outbox.checkObject, docs/approvals-and-budgets.md#objects-a-tenant-may-act-on), and the
-- TTL purge does not keep it as the tenant's object. Before this column, tenant B's
-- approver could resolve an op as succeeded with tenant A's object id and B's agents could
-- then act on it (issue 42).
-- Expand-only: a new column with a constant default (no rewrite), which v0.1.0 never
-- reads or writes (its resolutions leave it false, as before).
ALTER TABLE oncebox_op ADD COLUMN IF NOT EXISTS vendor_ref_typed boolean NOT NULL DEFAULT false;
