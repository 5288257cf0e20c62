package outbox

// All of the outbox package's SQL lives here. Every query that touches an op of a tenant
// is scoped by tenant_id; the worker's queries use the op id carried by its own job.

const opColumns = `id::text AS id, tenant_id, idempotency_key, tool, vendor, args, fingerprint, status,
	attempts, generation, vendor_key, coalesce(vendor_ref, '') AS vendor_ref, result, error,
	coalesce(conversation_id, '') AS conversation_id, coalesce(tool_call_id, '') AS tool_call_id,
	created_at, updated_at, expires_at, dispatch_started_at`

// sqlEnqueue inserts an op unless its key exists. The first column says whether this
// statement inserted it; the second whether the key hit a tombstone. When the key exists
// but was committed after this statement's snapshot, no row comes back and the caller
// reads it with sqlOpByKey.
const sqlEnqueue = `
WITH ins AS (
	INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status,
		vendor_key, conversation_id, tool_call_id, expires_at, sealed_args)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, nullif($9, ''), nullif($10, ''), now() + make_interval(secs => $11), $12)
	ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
	RETURNING ` + opColumns + `
)
SELECT true, EXISTS (SELECT 1 FROM oncebox_tombstone t WHERE t.tenant_id = $1 AND t.idempotency_key = $2), ins.* FROM ins
UNION ALL
SELECT false, false, ` + opColumns + ` FROM oncebox_op
WHERE tenant_id = $1 AND idempotency_key = $2 AND NOT EXISTS (SELECT 1 FROM ins)`

const sqlOpByKey = `SELECT ` + opColumns + ` FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key = $2`

const sqlOpByIDForUpdate = `SELECT ` + opColumns + `, attempt_token::text, key_first_sent_at, stale_key, sealed_args,
	resend_before, coalesce(resend_before <= now(), false)
FROM oncebox_op WHERE id = $1 FOR UPDATE`

// sqlClaim commits an op as dispatching with a fresh attempt token before the vendor is
// called.
const sqlClaim = `
UPDATE oncebox_op SET status = 'dispatching', attempts = attempts + 1, attempt_token = gen_random_uuid(),
	dispatch_started_at = now(), key_first_sent_at = coalesce(key_first_sent_at, now()),
	stale_key = false, next_check_at = NULL, updated_at = now()
WHERE id = $1
RETURNING attempts, attempt_token::text, vendor_key, dispatch_started_at, key_first_sent_at, resend_before`

const sqlInsertAttempt = `
INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, job_id, started_at)
VALUES ($1, $2, $3, $4, $5, $6)`

// sqlRecord records a vendor's answer, only where the attempt token still matches
// (fencing). An op marked unknown by a successor keeps the token, so a predecessor that
// was slow rather than dead may still record a definite answer.
const sqlRecord = `
UPDATE oncebox_op SET status = $3, result = $4, error = $5, vendor_ref = coalesce(nullif($6, ''), vendor_ref),
	attempt_token = CASE WHEN $3 IN ('dispatching', 'unknown') THEN attempt_token ELSE NULL END,
	stale_key = $7, args = coalesce($8, args), next_check_at = $9, updated_at = now(),
	sealed_args = CASE WHEN $3 IN ('succeeded', 'failed') THEN NULL ELSE sealed_args END,
	resend_before = $12
WHERE id = $1 AND attempt_token = $2::uuid AND status IN ('dispatching', 'unknown')
RETURNING status`

// sqlMarkUnknown is used by a job that finds its op already dispatching outside the
// vendor's idempotency window, or pending past its resend_before: the op goes to the
// reconciler, the token is kept.
const sqlMarkUnknown = `
UPDATE oncebox_op SET status = 'unknown', next_check_at = now(), updated_at = now(), resend_before = NULL
WHERE id = $1 AND status IN ('dispatching', 'pending')`

// sqlRejectTerminal records a rejection's error on a rejected op, replaces its args
// with their redacted form ($3, when not NULL) and drops its sealed args.
const sqlRejectTerminal = `
UPDATE oncebox_op SET error = $2, args = coalesce($3, args), sealed_args = NULL WHERE id = $1`

// sqlHasSealedArgs reports whether an op's full args are sealed.
const sqlHasSealedArgs = `SELECT sealed_args IS NOT NULL FROM oncebox_op WHERE id = $1`

// sqlCloseLostAttempts closes the attempts of an op found dispatching by another job:
// their worker died (or timed out) without recording an answer.
const sqlCloseLostAttempts = `
UPDATE oncebox_attempt SET finished_at = now(), outcome = 'lost',
	error = 'no answer was recorded: the worker stopped (crash, kill or timeout) and job ' || ($2::bigint)::text || ' took the op over'
WHERE op_id = $1 AND finished_at IS NULL`

const sqlInsertEvent = `
INSERT INTO oncebox_op_event (op_id, kind, from_status, to_status, actor, detail)
VALUES ($1, $2, nullif($3, ''), nullif($4, ''), nullif($5, ''), $6)`

const sqlAttempts = `
SELECT a.attempt, a.token::text, a.vendor_key, coalesce(a.job_id, 0), a.started_at, a.finished_at,
	coalesce(a.outcome, ''), coalesce(a.error, ''), coalesce(a.vendor_ref, '')
FROM oncebox_attempt a JOIN oncebox_op o ON o.id = a.op_id
WHERE o.tenant_id = $1 AND a.op_id = $2 ORDER BY a.id`

const sqlEvents = `
SELECT e.at, e.kind, coalesce(e.from_status, ''), coalesce(e.to_status, ''), coalesce(e.actor, ''), e.detail
FROM oncebox_op_event e JOIN oncebox_op o ON o.id = e.op_id
WHERE o.tenant_id = $1 AND e.op_id = $2 ORDER BY e.id`

const sqlSetStatusByKey = `
UPDATE oncebox_op SET status = $4, updated_at = now()
WHERE tenant_id = $1 AND idempotency_key = $2 AND status = $3
RETURNING ` + opColumns

const sqlOpByTenantID = `SELECT ` + opColumns + ` FROM oncebox_op WHERE tenant_id = $1 AND id = $2::uuid`

// sqlClaimPending is the fast path of a claim: a pending op is committed as dispatching
// with a fresh attempt token, and its attempt row inserted, in one statement. When the
// op is not pending, or is pending past its resend_before, no row comes back and the
// worker takes the locking path.
const sqlClaimPending = `
WITH c AS (
	UPDATE oncebox_op SET status = 'dispatching', attempts = attempts + 1, attempt_token = gen_random_uuid(),
		dispatch_started_at = now(), key_first_sent_at = coalesce(key_first_sent_at, now()),
		stale_key = false, next_check_at = NULL, updated_at = now()
	WHERE id = $1 AND status = 'pending' AND (resend_before IS NULL OR now() < resend_before)
	RETURNING ` + opColumns + `, attempt_token::text AS token, sealed_args, key_first_sent_at, resend_before
), a AS (
	INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, job_id, started_at)
	SELECT id::uuid, attempts, token::uuid, vendor_key, $2, dispatch_started_at FROM c
)
SELECT * FROM c`

// recordAndFinish records a vendor's answer where the attempt token still matches
// (sqlRecord) and closes the attempt row in the same statement; the attempt's outcome
// says "fenced:" when the token no longer matched.
const recordAndFinish = `
WITH r AS (` + sqlRecord + `
), a AS (
	UPDATE oncebox_attempt SET finished_at = now(),
		outcome = CASE WHEN EXISTS (SELECT 1 FROM r) THEN $10::text ELSE 'fenced:' || $10::text END,
		error = nullif($11, ''), vendor_ref = nullif($6, '')
	WHERE op_id = $1 AND token = $2::uuid
	RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM r), EXISTS (SELECT 1 FROM a)`

// sqlRecordAndFinish is recordAndFinish on its own (autocommitted).
const sqlRecordAndFinish = recordAndFinish

// sqlRecordAndFinishBeforeJobComplete is recordAndFinish for a transaction that goes
// on with River's JobCompleteTx. It also sets plan_cache_mode to force_generic_plan for
// the rest of the transaction: River's job update (JobSetStateIfRunningMany) is
// otherwise planned afresh on every execution, which measured 0.5 ms of Postgres CPU
// per op, the largest single cost of a dispatch; its generic plan is the same index
// lookup by job id. End to end: +25-30% ops/s.
const sqlRecordAndFinishBeforeJobComplete = recordAndFinish +
	` FROM (SELECT set_config('plan_cache_mode', 'force_generic_plan', true)) AS generic_plans`

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

// sqlPurgeKeyWindows deletes closed key windows.
const sqlPurgeKeyWindows = `DELETE FROM oncebox_key_window WHERE closes_at < now()`
