package tenant

// The SQL of token storage and authentication that has more than one clause.
const (
	sqlInsertToken = `INSERT INTO oncebox_api_token (tenant_id, token_hash, prefix, role) VALUES ($1, $2, $3, $4)`

	sqlAuthenticate = `SELECT t.id, t.name, t.created_at, k.id, k.role FROM oncebox_api_token k
		JOIN oncebox_tenant t ON t.id = k.tenant_id
		WHERE k.token_hash = $1 AND k.revoked_at IS NULL`

	sqlTokens = `SELECT k.id, k.tenant_id, k.prefix, k.role, k.created_at, k.revoked_at
		FROM oncebox_api_token k JOIN oncebox_tenant t ON t.id = k.tenant_id
		WHERE t.name = $1 ORDER BY k.id`
)
