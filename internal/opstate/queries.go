package opstate

// All of the SQL that writes oncebox_op lives here: every status change, the sweeper's
// lease, the purge, and the attempt rows a dispatch writes alongside. Every status
// change is guarded by the status it starts from, and those that may end terminal take
// the drop-sealed flag (the transition's, never the caller's) as a parameter.

// OpColumns is the select list of a whole op, in the order outbox scans it.
const OpColumns = `id::text AS id, tenant_id, idempotency_key, tool, vendor, args, fingerprint, status,
	attempts, generation, vendor_key, coalesce(vendor_ref, '') AS vendor_ref, result, error,
	coalesce(conversation_id, '') AS conversation_id, coalesce(tool_call_id, '') AS tool_call_id,
	created_at, updated_at, expires_at, dispatch_started_at`

// identColumns is what a status change returns about its op for the log line and the
// metric: see Ident.
const identColumns = `tenant_id, idempotency_key, coalesce(conversation_id, ''), coalesce(tool_call_id, ''),
	vendor, attempts, coalesce(vendor_ref, '')`

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
	RETURNING ` + OpColumns + `, attempt_token::text AS token, sealed_args, key_first_sent_at, resend_before
), a AS (
	INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, job_id, started_at)
	SELECT id::uuid, attempts, token::uuid, vendor_key, $2, dispatch_started_at FROM c
)
SELECT * FROM c`

// sqlClaim commits a locked op as dispatching with a fresh attempt token before the
// vendor is called ($2: the status it is in).
const sqlClaim = `
UPDATE oncebox_op SET status = 'dispatching', attempts = attempts + 1, attempt_token = gen_random_uuid(),
	dispatch_started_at = now(), key_first_sent_at = coalesce(key_first_sent_at, now()),
	stale_key = false, next_check_at = NULL, updated_at = now()
WHERE id = $1 AND status = $2
RETURNING attempts, attempt_token::text, vendor_key, dispatch_started_at, key_first_sent_at, resend_before`

const sqlInsertAttempt = `
INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, job_id, started_at)
VALUES ($1, $2, $3, $4, $5, $6)`

// sqlCloseLostAttempts closes the attempts of an op found dispatching by another job:
// their worker died (or timed out) without recording an answer.
const sqlCloseLostAttempts = `
UPDATE oncebox_attempt SET finished_at = now(), outcome = 'lost',
	error = 'no answer was recorded: the worker stopped (crash, kill or timeout) and job ' || ($2::bigint)::text || ' took the op over'
WHERE op_id = $1 AND finished_at IS NULL`

// sqlRecord records a vendor's answer, only where the attempt token still matches
// (fencing). An op marked unknown by a successor keeps the token, so a predecessor that
// was slow rather than dead may still record a definite answer.
const sqlRecord = `
UPDATE oncebox_op SET status = $3, result = $4, error = $5, vendor_ref = coalesce(nullif($6, ''), vendor_ref),
	attempt_token = CASE WHEN $3 IN ('dispatching', 'unknown') THEN attempt_token ELSE NULL END,
	stale_key = $7, args = coalesce($8, args), next_check_at = $9, updated_at = now(),
	sealed_args = CASE WHEN $13::boolean THEN NULL ELSE sealed_args END,
	resend_before = $12
WHERE id = $1 AND attempt_token = $2::uuid AND status IN ('dispatching', 'unknown')
RETURNING status`

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

// sqlHandOver moves an op the worker may not send (pending past its resend_before, or
// dispatching outside the vendor's idempotency window) to unknown for the reconciler;
// the token is kept.
const sqlHandOver = `
UPDATE oncebox_op SET status = 'unknown', next_check_at = now(), updated_at = now(), resend_before = NULL
WHERE id = $1 AND status = $2
RETURNING ` + identColumns

// sqlMarkStuck moves an op stuck in dispatching to unknown, only if it is still the same
// stuck attempt ($3) and still has no running job. The attempt token is kept, so a
// predecessor that was slow rather than dead may still record a definite answer.
const sqlMarkStuck = `
UPDATE oncebox_op o SET status = 'unknown', next_check_at = NULL, updated_at = now()
WHERE o.id = $1 AND o.status = $2 AND o.dispatch_started_at = $3
	AND NOT EXISTS (SELECT 1 FROM river_job j
		WHERE j.kind = 'oncebox.dispatch' AND j.args->>'op_id' = o.id::text AND j.state = 'running')
RETURNING ` + identColumns

// sqlCheckLater keeps an op unknown and sets its next check ($3).
const sqlCheckLater = `
UPDATE oncebox_op SET next_check_at = $3, updated_at = now() WHERE id = $1 AND status = $2
RETURNING ` + identColumns

// sqlSettle makes an op terminal ($3) with result $4 or error $5, naming the vendor's
// object $7; $6 replaces its args with their redacted form when not NULL. $8 drops the
// sealed copy of its full args.
const sqlSettle = `
UPDATE oncebox_op SET status = $3, result = $4, error = $5, vendor_ref = nullif($7, ''),
	args = coalesce($6, args), attempt_token = NULL, next_check_at = NULL, updated_at = now(),
	sealed_args = CASE WHEN $8::boolean THEN NULL ELSE sealed_args END
WHERE id = $1 AND status = $2
RETURNING ` + identColumns

// sqlRelease sends an op to pending for the worker to dispatch (an approval, a resend).
// With $3 the op moves to a new generation with the vendor key $4.
const sqlRelease = `
UPDATE oncebox_op SET status = 'pending', attempt_token = NULL, next_check_at = NULL, updated_at = now(), resend_before = NULL,
	generation = CASE WHEN $3 THEN generation + 1 ELSE generation END,
	vendor_key = CASE WHEN $3 THEN $4 ELSE vendor_key END,
	key_first_sent_at = CASE WHEN $3 THEN NULL ELSE key_first_sent_at END,
	stale_key = CASE WHEN $3 THEN false ELSE stale_key END
WHERE id = $1 AND status = $2
RETURNING ` + identColumns

// sqlToReview hands an op to a person.
const sqlToReview = `
UPDATE oncebox_op SET status = 'needs_review', next_check_at = NULL, updated_at = now() WHERE id = $1 AND status = $2
RETURNING ` + identColumns

const sqlInsertEvent = `
INSERT INTO oncebox_op_event (op_id, kind, from_status, to_status, actor, detail)
VALUES ($1, $2, nullif($3, ''), nullif($4, ''), nullif($5, ''), $6)`

// sqlLeaseUnknown picks the unknown ops due for a check and leases them by moving their
// next check past the sweep ($3), so that a concurrent sweep in another process skips
// them; the decision then sets the real next check. $1 is now, $2 the batch size.
const sqlLeaseUnknown = `
UPDATE oncebox_op SET next_check_at = $3
WHERE id IN (
	SELECT id FROM oncebox_op
	WHERE status = 'unknown' AND (next_check_at IS NULL OR next_check_at <= $1)
	ORDER BY next_check_at NULLS FIRST, updated_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED)
RETURNING id::text`

// sqlCheckSoon makes the unknown ops among $1 due for a check now.
const sqlCheckSoon = `
UPDATE oncebox_op SET next_check_at = now()
WHERE id = ANY($1::uuid[]) AND status = 'unknown' AND next_check_at > now()`

// sqlPurgeBatch deletes up to $1 expired ops in the statuses $3 (the ones the table lets
// the purge take: terminal) and leaves a tombstone for each. Ops that are not terminal
// (pending, dispatching, unknown, needs review, awaiting approval) are kept past their
// TTL: something or someone still has to decide them.
const sqlPurgeBatch = `
WITH doomed AS (
	SELECT id FROM oncebox_op
	WHERE expires_at < now() AND status = ANY($3::text[])
	ORDER BY expires_at
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), deleted AS (
	DELETE FROM oncebox_op o USING doomed WHERE o.id = doomed.id
	RETURNING o.tenant_id, o.idempotency_key, o.fingerprint
)
INSERT INTO oncebox_tombstone (tenant_id, idempotency_key, fingerprint, expired_at, purge_after)
SELECT tenant_id, idempotency_key, fingerprint, now(), now() + make_interval(secs => $2) FROM deleted
ON CONFLICT (tenant_id, idempotency_key) DO UPDATE
	SET fingerprint = EXCLUDED.fingerprint, expired_at = EXCLUDED.expired_at, purge_after = EXCLUDED.purge_after`

const sqlPurgeTombstones = `DELETE FROM oncebox_tombstone WHERE purge_after < now()`
