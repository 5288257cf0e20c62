package console

// All of the console package's SQL lives here. The console only reads ops: every change
// goes through the same outbox and reconcile calls as the HTTP API.
const (
	// sqlInsertSession stores a new session under the hash of its secret.
	sqlInsertSession = `INSERT INTO oncebox_console_session (id_hash, token_id, expires_at)
		VALUES ($1, $2, now() + make_interval(secs => $3))`

	// sqlSession reads who a live session acts as: its token's tenant, id, role and
	// person (so that a decision names the person, and four-eyes rules count people, as
	// the API's do). A revoked token or an expired session reads nothing.
	sqlSession = `SELECT t.id, t.name, t.created_at, k.id, k.role, coalesce(k.person, ''), s.expires_at
		FROM oncebox_console_session s
		JOIN oncebox_api_token k ON k.id = s.token_id
		JOIN oncebox_tenant t ON t.id = k.tenant_id
		WHERE s.id_hash = $1 AND s.expires_at > now() AND k.revoked_at IS NULL`

	// sqlDeleteSession ends a session (sign-out).
	sqlDeleteSession = `DELETE FROM oncebox_console_session WHERE id_hash = $1`

	// sqlDeleteExpiredSessions forgets sessions and links that ran out; run on each sign-in.
	sqlDeleteExpiredSessions = `WITH s AS (DELETE FROM oncebox_console_session WHERE expires_at < now())
		DELETE FROM oncebox_console_link WHERE expires_at < now()`

	// sqlInsertLink stores a one-time sign-in link's code hash for a token.
	sqlInsertLink = `INSERT INTO oncebox_console_link (code_hash, token_id, expires_at)
		VALUES ($1, $2, now() + make_interval(secs => $3))`

	// sqlUseLink marks a link used, once, and returns its token id; an unknown, used or
	// expired code reads nothing.
	sqlUseLink = `UPDATE oncebox_console_link SET used_at = now()
		WHERE code_hash = $1 AND used_at IS NULL AND expires_at > now() RETURNING token_id`

	// sqlTokenPrincipal reads who a live token is, by id.
	sqlTokenPrincipal = `SELECT t.id, t.name, t.created_at, k.id, k.role FROM oncebox_api_token k
		JOIN oncebox_tenant t ON t.id = k.tenant_id
		WHERE k.id = $1 AND k.revoked_at IS NULL`

	// sqlStatusCounts counts the tenant's ops created since $2, per tool and status.
	sqlStatusCounts = `SELECT tool, status, count(*) FROM oncebox_op
		WHERE tenant_id = $1 AND created_at >= $2 GROUP BY tool, status ORDER BY tool, status`

	// sqlOpenCounts counts the tenant's ops that wait for a person, whenever created.
	sqlOpenCounts = `SELECT count(*) FILTER (WHERE status = 'needs_review'),
		count(*) FILTER (WHERE status = 'awaiting_approval') FROM oncebox_op WHERE tenant_id = $1`
)
