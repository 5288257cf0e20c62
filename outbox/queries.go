package outbox

import "github.com/oncebox/oncebox/internal/opstate"

// All of the outbox package's SQL lives here: the enqueue and the reads. Every query that
// touches an op of a tenant is scoped by tenant_id; the worker's queries use the op id
// carried by its own job. Status changes are internal/opstate's.

const opColumns = opstate.OpColumns

// sqlEnqueue inserts an op unless its key exists. The first column says whether this
// statement inserted it; the second, when the key hit a tombstone, the purged op's last
// generation (NULL otherwise); the third, for an inserted op, the version of the
// tenant's own approval rule of the tool as stored (0: the tenant has none), which the
// gate checks what it remembers against (GateOp.PolicyVersion); the fourth, the version
// of the tenant's own budgets (GateOp.BudgetVersion); the fifth, the version of the
// installation's stored rules and budgets (GateOp.InstallationVersion). The op records the
// API token that asked ($15, 0: none), which the audit log's call entry names, and the account of
// its tenant's vendor settings (oncebox_tenant_vendor) as they are in this statement:
// no other read, and a tenant without settings costs an index probe. The tenant's row is
// read, not locked (migration 027 dropped the foreign key, whose check locked it at
// every enqueue): an unknown tenant leaves tenant_id NULL, and the insert fails with
// not_null_violation (unknownTenant). When the key exists
// but was committed after this statement's snapshot, no row comes back and the caller
// reads it with sqlOpByKey.
const sqlEnqueue = `
WITH ins AS (
	INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status,
		vendor_key, conversation_id, tool_call_id, expires_at, retention, sealed_args, trace_parent,
		tool_definition, vendor_account, asked_by_token)
	VALUES ((SELECT t.id FROM oncebox_tenant t WHERE t.id = $1), $2, $3, $4, $5, $6, $7, $8, nullif($9, ''), nullif($10, ''), now() + make_interval(secs => $11),
		make_interval(secs => $11), $12, nullif($13, ''), $14,
		(SELECT v.account FROM oncebox_tenant_vendor v WHERE v.tenant_id = $1 AND v.vendor = $4), nullif($15::bigint, 0))
	ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
	RETURNING ` + opColumns + `
)
SELECT true, (SELECT t.generation FROM oncebox_tombstone t WHERE t.tenant_id = $1 AND t.idempotency_key = $2),
	coalesce((SELECT p.version FROM oncebox_approval_policy p WHERE p.tenant_id = $1 AND p.tool = $3), 0),
	(SELECT coalesce(max(b.version), 0)::text || ':' || count(*) FROM oncebox_tenant_budget b WHERE b.tenant_id = $1),
	` + sqlInstallationVersion + `, ins.* FROM ins
UNION ALL
SELECT false, NULL::integer, 0::bigint, '', '', ` + opColumns + ` FROM oncebox_op
WHERE tenant_id = $1 AND idempotency_key = $2 AND NOT EXISTS (SELECT 1 FROM ins)`

// sqlInstallationVersion names the installation's stored approval rules and budgets
// (migration 029) as "newest version:count", "0:0" when none is stored.
const sqlInstallationVersion = `(SELECT coalesce(max(d.version), 0)::text || ':' || count(*) FROM oncebox_installation_policy d)`

// sqlEnqueueMany is sqlEnqueue for the calls of a group commit, in one statement: the
// calls are the arrays' elements, their keys distinct, and each row it returns starts
// with the number (from 1) of the call whose op it inserted, followed by sqlEnqueue's
// columns after its first. A call whose key held an op already gets no row, and is
// left to sqlEnqueue on its own. The ops are inserted in the arrays' order, so that
// groups given their calls in one order lock their keys in that order.
const sqlEnqueueMany = `
WITH c AS (
	SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[],
		$8::text[], $9::text[], $10::float8[], $11::bytea[], $12::text[], $13::text[], $15::bigint[])
		WITH ORDINALITY AS c(tenant_id, idempotency_key, tool, vendor, args, fingerprint, vendor_key,
			conversation_id, tool_call_id, ttl, sealed_args, trace_parent, tool_definition, asked_by_token, n)
), ins AS (
	INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status,
		vendor_key, conversation_id, tool_call_id, expires_at, retention, sealed_args, trace_parent,
		tool_definition, vendor_account, asked_by_token)
	SELECT (SELECT t.id FROM oncebox_tenant t WHERE t.id = c.tenant_id), c.idempotency_key, c.tool, c.vendor, c.args::jsonb, c.fingerprint, $14, c.vendor_key,
		nullif(c.conversation_id, ''), nullif(c.tool_call_id, ''), now() + make_interval(secs => c.ttl),
		make_interval(secs => c.ttl), c.sealed_args, nullif(c.trace_parent, ''), c.tool_definition::jsonb,
		(SELECT v.account FROM oncebox_tenant_vendor v WHERE v.tenant_id = c.tenant_id AND v.vendor = c.vendor),
		nullif(c.asked_by_token, 0)
	FROM c ORDER BY c.n
	ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
	RETURNING ` + opColumns + `
)
SELECT c.n, (SELECT t.generation FROM oncebox_tombstone t WHERE t.tenant_id = c.tenant_id AND t.idempotency_key = c.idempotency_key),
	coalesce((SELECT p.version FROM oncebox_approval_policy p WHERE p.tenant_id = c.tenant_id AND p.tool = c.tool), 0),
	(SELECT coalesce(max(b.version), 0)::text || ':' || count(*) FROM oncebox_tenant_budget b WHERE b.tenant_id = c.tenant_id),
	` + sqlInstallationVersion + `, ins.*
FROM ins JOIN c ON c.tenant_id = ins.tenant_id AND c.idempotency_key = ins.idempotency_key`

// sqlDeleteRefusedOp removes a new op the gate refused, in the enqueue's transaction,
// so that a refusal records nothing in the caller's transaction either.
const sqlDeleteRefusedOp = `DELETE FROM oncebox_op WHERE id = $1::uuid`

// sqlObjectOwned says whether object $3 of vendor $2 is tenant $1's: one of its ops has
// it as its vendor reference as the vendor said it (oncebox_op_ref, migration 034; a
// reference a person typed in a resolution is a claim, not evidence), or the tenant
// adopted it.
const sqlObjectOwned = `
SELECT EXISTS (SELECT 1 FROM oncebox_op_ref WHERE tenant_id = $1 AND vendor_ref = $3 AND vendor = $2 AND NOT typed)
	OR EXISTS (SELECT 1 FROM oncebox_tenant_object WHERE tenant_id = $1 AND vendor = $2 AND object_id = $3)`

// sqlAccountOwned says whether every object in the vendor account an op of tenant $1 at
// vendor $2 is sent on ($3, its Op.VendorAccount) is the tenant's without adoption:
// an account of its own ("acct_…" or "key:…") that no other tenant's setting names
// (the vendor keeps that account's objects apart), or the installation's account ("")
// claimed by the tenant (oncebox_vendor_owner) while it is the installation's only
// tenant, in an installation of one cell (with several, a cell's tenants are not all the
// installation's: docs/scaling.md).
const sqlAccountOwned = `
SELECT CASE WHEN $3::text <> '' THEN NOT EXISTS (SELECT 1 FROM oncebox_tenant_vendor v
		WHERE v.vendor = $2 AND v.account = $3 AND v.tenant_id <> $1)
	ELSE EXISTS (SELECT 1 FROM oncebox_vendor_owner w WHERE w.vendor = $2 AND w.tenant_id = $1)
		AND (SELECT count(*) FROM oncebox_tenant) = 1
		AND NOT EXISTS (SELECT 1 FROM oncebox_cell WHERE name <> 'home') AND NOT EXISTS (SELECT 1 FROM oncebox_cell_self) END`

// sqlObjectOthers says whether object $3 at vendor $2 was made by an op of a tenant
// other than $1 or adopted by one: on an account owned wholesale (sqlAccountOwned), a
// tenant that took the account over after another tenant's setting was deleted must not
// act on the objects that tenant made or adopted there. One index probe per tenant.
const sqlObjectOthers = `
SELECT EXISTS (SELECT 1 FROM oncebox_tenant t WHERE t.id <> $1 AND (
	EXISTS (SELECT 1 FROM oncebox_op_ref r WHERE r.tenant_id = t.id AND r.vendor_ref = $3 AND r.vendor = $2 AND NOT r.typed)
	OR EXISTS (SELECT 1 FROM oncebox_tenant_object a WHERE a.tenant_id = t.id AND a.vendor = $2 AND a.object_id = $3)))`

// sqlTaggedOpOwned says whether op $3, which an object is tagged with, is an op of
// tenant $1 at vendor $2.
const sqlTaggedOpOwned = `SELECT EXISTS (SELECT 1 FROM oncebox_op WHERE id = $3::uuid AND tenant_id = $1 AND vendor = $2)`

// sqlNextGeneration moves a new op whose key hit a tombstone past the purged op's last
// generation ($2 the new one, $3 its vendor key), in the enqueue's transaction.
const sqlNextGeneration = `UPDATE oncebox_op SET generation = $2, vendor_key = $3 WHERE id = $1`

const sqlOpByKey = `SELECT ` + opColumns + ` FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key = $2`

// sqlOpByKeyForUpdate locks the tenant's op under a key for a decision (an approval),
// and says whether its full args are sealed (its stored args are then the redacted form).
const sqlOpByKeyForUpdate = `SELECT ` + opColumns + `, sealed_args IS NOT NULL
FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key = $2 FOR UPDATE`

// sqlAttempts lists an op's attempts: its attempt rows, then the one folded into its
// row, if any (opstate.FoldedAttempt).
const sqlAttempts = `
SELECT attempt, coalesce(token::text, ''), vendor_key, coalesce(job_id, 0), started_at, finished_at,
	coalesce(outcome, ''), coalesce(error, ''), coalesce(vendor_ref, '')
FROM (SELECT a.id, a.attempt, a.token, a.vendor_key, a.job_id, a.started_at, a.finished_at, a.outcome, a.error, a.vendor_ref
	FROM oncebox_attempt a JOIN oncebox_op o ON o.id = a.op_id
	WHERE o.tenant_id = $1 AND a.op_id = $2
	UNION ALL
	SELECT NULL, ` + opstate.FoldedAttempt + `
	FROM oncebox_op o WHERE o.tenant_id = $1 AND o.id = $2 AND o.clean_finished_at IS NOT NULL) x
ORDER BY id NULLS LAST`

// sqlOpByTenantID reads the tenant's op by id.
const sqlOpByTenantID = `SELECT ` + opColumns + ` FROM oncebox_op WHERE tenant_id = $1 AND id = $2::uuid`

const sqlEvents = `
SELECT e.at, e.kind, coalesce(e.from_status, ''), coalesce(e.to_status, ''), coalesce(e.actor, ''), e.detail
FROM oncebox_op_event e JOIN oncebox_op o ON o.id = e.op_id
WHERE o.tenant_id = $1 AND e.op_id = $2 ORDER BY e.id`

// sqlKeyInWindow returns the key of the open window of a call, or opens one under $3.
// The conflicting row is always updated (to itself while the window is open), so the
// statement returns the row in every case and a concurrent caller waits for the
// first one's row, then reads it.
const sqlKeyInWindow = `
INSERT INTO oncebox_key_window AS w (tenant_id, call_hash, idempotency_key, opened_at, closes_at)
VALUES ($1, $2, $3, now(), now() + make_interval(secs => $4))
ON CONFLICT (tenant_id, call_hash) DO UPDATE SET
	idempotency_key = CASE WHEN w.closes_at > now() THEN w.idempotency_key ELSE EXCLUDED.idempotency_key END,
	opened_at = CASE WHEN w.closes_at > now() THEN w.opened_at ELSE EXCLUDED.opened_at END,
	closes_at = CASE WHEN w.closes_at > now() THEN w.closes_at ELSE EXCLUDED.closes_at END
RETURNING idempotency_key`

// sqlKeyByIdentity returns the key of the open window of a call's payload ($3; none
// when empty), else of its identity ($2), else $4, and leaves both windows open under the
// key returned (each conflicting row updated to itself while open, as in
// sqlKeyInWindow). $5 is the window in seconds.
const sqlKeyByIdentity = `
WITH same AS (
	SELECT idempotency_key FROM oncebox_key_window
	WHERE tenant_id = $1 AND call_hash = $3 AND $3 <> '' AND closes_at > now()
), ident AS (
	INSERT INTO oncebox_key_window AS w (tenant_id, call_hash, idempotency_key, opened_at, closes_at)
	VALUES ($1, $2, coalesce((SELECT idempotency_key FROM same), $4), now(), now() + make_interval(secs => $5))
	ON CONFLICT (tenant_id, call_hash) DO UPDATE SET
		idempotency_key = CASE WHEN w.closes_at > now() THEN w.idempotency_key ELSE EXCLUDED.idempotency_key END,
		opened_at = CASE WHEN w.closes_at > now() THEN w.opened_at ELSE EXCLUDED.opened_at END,
		closes_at = CASE WHEN w.closes_at > now() THEN w.closes_at ELSE EXCLUDED.closes_at END
	RETURNING idempotency_key
), payload AS (
	INSERT INTO oncebox_key_window AS w (tenant_id, call_hash, idempotency_key, opened_at, closes_at)
	SELECT $1, $3, coalesce((SELECT idempotency_key FROM same), ident.idempotency_key), now(), now() + make_interval(secs => $5)
	FROM ident WHERE $3 <> ''
	ON CONFLICT (tenant_id, call_hash) DO UPDATE SET
		idempotency_key = CASE WHEN w.closes_at > now() THEN w.idempotency_key ELSE EXCLUDED.idempotency_key END,
		opened_at = CASE WHEN w.closes_at > now() THEN w.opened_at ELSE EXCLUDED.opened_at END,
		closes_at = CASE WHEN w.closes_at > now() THEN w.closes_at ELSE EXCLUDED.closes_at END
	RETURNING idempotency_key
)
SELECT coalesce((SELECT idempotency_key FROM same), ident.idempotency_key) FROM ident
	LEFT JOIN (SELECT count(*) AS n FROM payload) p ON true`

// Identity matches (identity.go): calls matched to an op by their tool's identity
// fields and answered with it.

const sqlInsertIdentityMatch = `
INSERT INTO oncebox_identity_match (op_id, tenant_id, fingerprint, differed, conversation_id, tool_call_id)
VALUES ($1::uuid, $2, $3, $4, nullif($5, ''), nullif($6, ''))
RETURNING at`

const sqlIdentityMatches = `
SELECT at, fingerprint, differed, coalesce(conversation_id, ''), coalesce(tool_call_id, '')
FROM oncebox_identity_match WHERE tenant_id = $1 AND op_id = $2::uuid ORDER BY id`

const sqlSealedArgs = `SELECT sealed_args FROM oncebox_op WHERE tenant_id = $1 AND id = $2`

// Approvals: policies, requests, votes, decisions and expiry (approval.go, policy.go).
// Status changes go through opstate; these read and write the approval rows.

// sqlOpByIDForDecision locks an op by id, like sqlOpByKeyForUpdate.
const sqlOpByIDForDecision = `SELECT ` + opColumns + `, sealed_args IS NOT NULL FROM oncebox_op WHERE id = $1::uuid FOR UPDATE`

const sqlRequestApproval = `
INSERT INTO oncebox_approval (op_id, tenant_id, policy_version, fingerprint, approvers_needed, why, expires_at, requested_by_token, budget)
VALUES ($1::uuid, $2, $3, $4, $5, $6, now() + make_interval(secs => $7), $8, nullif($9, ''))`

const sqlApprovalForUpdate = `
SELECT policy_version, fingerprint, approvers_needed, why, requested_at, expires_at, expires_at <= now(), decision
FROM oncebox_approval WHERE op_id = $1::uuid FOR UPDATE`

const sqlApprovalVote = `INSERT INTO oncebox_approval_vote (op_id, voter) VALUES ($1::uuid, $2) ON CONFLICT DO NOTHING`

const sqlApprovalVotes = `SELECT count(*)::int FROM oncebox_approval_vote WHERE op_id = $1::uuid`

const sqlDecideApproval = `UPDATE oncebox_approval SET decision = $2, decided_at = now() WHERE op_id = $1::uuid`

const sqlDueApprovals = `
SELECT op_id::text FROM oncebox_approval WHERE decision IS NULL AND expires_at <= now() ORDER BY expires_at LIMIT $1`

const sqlListWaiting = `
SELECT o.*, a.why, a.policy_version, a.approvers_needed, a.requested_at, a.expires_at,
	(SELECT count(*)::int FROM oncebox_approval_vote v WHERE v.op_id = a.op_id), coalesce(a.requested_by_token, 0)
FROM oncebox_approval a
JOIN LATERAL (SELECT ` + opColumns + `, sealed_args IS NOT NULL AS sealed FROM oncebox_op
	WHERE id = a.op_id AND status = 'awaiting_approval') o ON true
WHERE a.tenant_id = $1 AND a.decision IS NULL AND a.expires_at > now()
ORDER BY a.requested_at, a.op_id
LIMIT $2`

const sqlWaitReason = `SELECT why FROM oncebox_approval WHERE tenant_id = $1 AND op_id = $2::uuid`

const sqlKeyExists = `SELECT EXISTS (SELECT 1 FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key = $2)`

// The review queries are scoped by tenant and idempotency key.

// sqlListReview lists the ops waiting for a person, with their latest event or, when
// the worker sent them there, the error it recorded. $1 = 0 lists every tenant. An op
// needs review exactly while review_since is set (a trigger keeps it, migration 036),
// which the partial index oncebox_op_review_since serves without an index on status.
const sqlListReview = `
SELECT o.id::text, o.idempotency_key, o.tool, o.vendor, o.tenant_id, o.attempts, o.updated_at,
	coalesce(e.kind || ': ' || coalesce(e.detail->>'decision', e.detail->>'reason', ''),
		'dispatch: ' || coalesce(o.error->>'code', o.error->>'message', ''), '')
FROM oncebox_op o
LEFT JOIN LATERAL (SELECT ev.kind, ev.detail FROM oncebox_op_event ev
	WHERE ev.op_id = o.id ORDER BY ev.id DESC LIMIT 1) e ON true
WHERE o.review_since IS NOT NULL AND ($1 = 0 OR o.tenant_id = $1)
ORDER BY o.updated_at, o.id`

// sqlReviewOpForUpdate locks the tenant's op under a key for a manual resolution, and
// says whether its full args are sealed (its stored args are then the redacted form).
const sqlReviewOpForUpdate = `
SELECT id::text, tool, vendor, status, generation, stale_key, args, sealed_args IS NOT NULL
FROM oncebox_op
WHERE tenant_id = $1 AND idempotency_key = $2 FOR UPDATE`

// sqlPing is the health check's query (Ping).
const sqlPing = `SELECT 1`

// sqlFindKeys returns the keys of the tenant's ops that a search term names: by
// idempotency key, op id, vendor reference (a SendGrid event's sg_message_id names
// the message as its x-message-id, then a dot and more) or conversation id, newest
// first; or by another id of its object, a member of its result that a tool's
// RefAliases names ($4: a payment's charge).
const sqlFindKeys = `SELECT idempotency_key FROM oncebox_op
WHERE tenant_id = $1 AND (idempotency_key = $2 OR id::text = lower($2)
	OR id IN (SELECT op_id FROM oncebox_op_ref WHERE tenant_id = $1 AND vendor_ref IN ($2, split_part($2, '.', 1)))
	OR conversation_id = $2
	OR EXISTS (SELECT 1 FROM unnest($4::text[]) a(m) WHERE result->>a.m = $2))
ORDER BY created_at DESC LIMIT $3`

// sqlOpKnownAs returns the key of the tenant's oldest op whose vendor reference, or a
// member of its result that a tool's RefAliases names ($3), is $2.
const sqlOpKnownAs = `SELECT idempotency_key FROM oncebox_op
WHERE tenant_id = $1 AND (id IN (SELECT op_id FROM oncebox_op_ref WHERE tenant_id = $1 AND vendor_ref = $2) OR EXISTS (SELECT 1 FROM unnest($3::text[]) a(m) WHERE result->>a.m = $2))
ORDER BY created_at, id LIMIT 1`

// sqlRefundsNaming returns the keys of the tenant's ops of tool $2 whose argument
// named by one of $3 is one of the ids $4, oldest first, at most $5.
const sqlRefundsNaming = `SELECT idempotency_key FROM oncebox_op
WHERE tenant_id = $1 AND tool = $2 AND EXISTS (SELECT 1 FROM unnest($3::text[]) a(arg) WHERE args->>a.arg = ANY($4::text[]))
ORDER BY created_at, id LIMIT $5`

// sqlPaymentByRef reads the tool and arguments of the tenant's op whose vendor ref is
// $2: the payment a refund names (the oldest, should two ops record one ref).
const sqlPaymentByRef = `
SELECT o.tool, o.args FROM oncebox_op_ref r JOIN oncebox_op o ON o.id = r.op_id
WHERE r.tenant_id = $1 AND r.vendor_ref = $2 ORDER BY o.created_at, o.id LIMIT 1`

// sqlRefundsOf reads the arguments of the tenant's succeeded ops of tool $2 whose
// argument $3 names the payment $4.
const sqlRefundsOf = `
SELECT args FROM oncebox_op WHERE tenant_id = $1 AND tool = $2 AND status = 'succeeded' AND args->>$3::text = $4`
