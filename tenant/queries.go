package tenant

// All of the tenant package's SQL lives here.
const (
	sqlInsertTenant = `INSERT INTO oncebox_tenant (name) VALUES ($1) RETURNING id, name, created_at`
	sqlTenantByName = `SELECT id, name, created_at FROM oncebox_tenant WHERE name = $1`
	sqlTenants      = `SELECT id, name, created_at FROM oncebox_tenant ORDER BY name`

	sqlRevokeByHash       = `UPDATE oncebox_api_token SET revoked_at = now() WHERE token_hash = $1 AND revoked_at IS NULL`
	sqlLiveTokensByPrefix = `SELECT count(*) FROM oncebox_api_token WHERE prefix = $1 AND revoked_at IS NULL`
	sqlRevokeByPrefix     = `UPDATE oncebox_api_token SET revoked_at = now() WHERE prefix = $1 AND revoked_at IS NULL`

	// sqlRevokeMintedTokens revokes the live tokens of a tenant whose listed prefix
	// starts with a minter's mark (mintedMark).
	sqlRevokeMintedTokens = `UPDATE oncebox_api_token SET revoked_at = now()
		WHERE tenant_id = (SELECT id FROM oncebox_tenant WHERE name = $1) AND starts_with(prefix, $2) AND revoked_at IS NULL`

	sqlInsertToken = `INSERT INTO oncebox_api_token (tenant_id, token_hash, prefix, role, person) VALUES ($1, $2, $3, $4, NULLIF($5, ''))`

	sqlAuthenticate = `SELECT t.id, t.name, t.created_at, k.id, k.role, coalesce(k.person, '') FROM oncebox_api_token k
		JOIN oncebox_tenant t ON t.id = k.tenant_id
		WHERE k.token_hash = $1 AND k.revoked_at IS NULL`

	// sqlTokenByPrefix finds the live token of a tenant with a listed prefix.
	sqlTokenByPrefix = `SELECT t.id, t.name, t.created_at, k.id, k.role, coalesce(k.person, '') FROM oncebox_api_token k
		JOIN oncebox_tenant t ON t.id = k.tenant_id
		WHERE t.name = $1 AND k.prefix = $2 AND k.revoked_at IS NULL`

	sqlTokens = `SELECT k.id, k.tenant_id, k.prefix, k.role, coalesce(k.person, ''), k.created_at, k.revoked_at
		FROM oncebox_api_token k JOIN oncebox_tenant t ON t.id = k.tenant_id
		WHERE t.name = $1 ORDER BY k.id`
)

// sqlAdopt adopts objects $3 of vendor $2 for tenant $1, keeping earlier adoptions.
const sqlAdopt = `INSERT INTO oncebox_tenant_object (tenant_id, vendor, object_id, adopted_by)
	SELECT $1, $2, id, $4 FROM unnest($3::text[]) AS id
	ON CONFLICT DO NOTHING`

// sqlObjects lists the objects tenant $1 adopted (every tenant's when $1 is ”).
const sqlObjects = `SELECT t.name, o.vendor, o.object_id, o.adopted_at, o.adopted_by
	FROM oncebox_tenant_object o JOIN oncebox_tenant t ON t.id = o.tenant_id
	WHERE $1 = '' OR t.name = $1
	ORDER BY t.name, o.vendor, o.object_id`
