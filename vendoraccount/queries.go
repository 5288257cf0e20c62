package vendoraccount

// Vendor settings per tenant (settings.go).
const (
	sqlInsertVendorKey = `INSERT INTO oncebox_tenant_vendor_key (tenant_id, vendor, fingerprint, sealed)
		VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id, vendor, fingerprint) DO UPDATE SET sealed = EXCLUDED.sealed`
	sqlSetTenantVendor = `INSERT INTO oncebox_tenant_vendor (tenant_id, vendor, account, key_hint, updated_by)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant_id, vendor) DO UPDATE SET account = EXCLUDED.account, key_hint = EXCLUDED.key_hint,
			updated_at = now(), updated_by = EXCLUDED.updated_by`
	// sqlVendorAccountHolder names another tenant than $1 whose setting at vendor $2 is
	// account $3.
	sqlVendorAccountHolder = `SELECT t.name FROM oncebox_tenant_vendor v JOIN oncebox_tenant t ON t.id = v.tenant_id
		WHERE v.vendor = $2 AND v.account = $3 AND v.tenant_id <> $1 LIMIT 1`
	sqlDeleteTenantVendor = `DELETE FROM oncebox_tenant_vendor WHERE tenant_id = $1 AND vendor = $2`
	// sqlPruneVendorKeys removes the keys of tenant $1 at vendor $2 that neither its
	// setting nor an op not yet settled names.
	sqlPruneVendorKeys = `DELETE FROM oncebox_tenant_vendor_key k WHERE k.tenant_id = $1 AND k.vendor = $2
		AND NOT EXISTS (SELECT 1 FROM oncebox_tenant_vendor v
			WHERE v.tenant_id = k.tenant_id AND v.vendor = k.vendor AND v.account = 'key:' || k.fingerprint)
		AND NOT EXISTS (SELECT 1 FROM oncebox_op o WHERE o.tenant_id = k.tenant_id AND o.vendor = k.vendor
			AND o.vendor_account = 'key:' || k.fingerprint AND o.status NOT IN ('succeeded', 'failed', 'rejected'))`
	sqlTenantVendors = `SELECT tenant_id, vendor, account, coalesce(key_hint, ''), updated_at, updated_by
		FROM oncebox_tenant_vendor WHERE $1 = 0 OR tenant_id = $1 ORDER BY tenant_id, vendor`
	sqlTenantOfAccount = `SELECT tenant_id FROM oncebox_tenant_vendor WHERE vendor = $1 AND account = $2 ORDER BY tenant_id LIMIT 1`
	sqlTenantVendorRef = `SELECT account FROM oncebox_tenant_vendor WHERE tenant_id = $1 AND vendor = $2`
	sqlVendorKey       = `SELECT sealed FROM oncebox_tenant_vendor_key WHERE tenant_id = $1 AND vendor = $2 AND fingerprint = $3`
)

// Claims on the installation's own accounts (owner.go).
const (
	// sqlOtherTenants counts the tenants other than $1, and says whether this database is
	// one cell of several (a cell's tenants are not the installation's).
	sqlOtherTenants = `SELECT count(*), ` + sqlSeveralCells + ` FROM oncebox_tenant WHERE id <> $1`
	// sqlSeveralCells is true in a database that is one cell of several (docs/scaling.md):
	// the home cell, once another cell is registered, and every other cell. Its tenants
	// are then not all the installation's, and no claim on the installation's account is
	// in force.
	sqlSeveralCells = `(EXISTS (SELECT 1 FROM oncebox_cell WHERE name <> 'home') OR EXISTS (SELECT 1 FROM oncebox_cell_self))`
	sqlOwnVendor    = `INSERT INTO oncebox_vendor_owner (vendor, tenant_id, owned_by) VALUES ($1, $2, $3)
		ON CONFLICT (vendor) DO UPDATE SET tenant_id = EXCLUDED.tenant_id, owned_at = now(), owned_by = EXCLUDED.owned_by
		WHERE oncebox_vendor_owner.tenant_id <> EXCLUDED.tenant_id`
	sqlDisownVendor = `DELETE FROM oncebox_vendor_owner WHERE vendor = $1 AND tenant_id = $2`
	// sqlVendorOwners lists the claims of tenant $1 (every claim when $1 is 0), each
	// with whether it is in force: its tenant is the only one, of an installation of one
	// cell.
	sqlVendorOwners = `SELECT w.tenant_id, w.vendor, w.owned_at, w.owned_by, (SELECT count(*) FROM oncebox_tenant) = 1 AND NOT ` + sqlSeveralCells + `
		FROM oncebox_vendor_owner w WHERE $1 = 0 OR w.tenant_id = $1 ORDER BY w.vendor`
)
