package reconcile

// All of the reconcile package's SQL lives here. The sweeper selects candidates and then
// touches each op by its id, as the dispatch worker does; the review queries are scoped
// by tenant and idempotency key; the report's queries by tenant when one is given.

// sqlDispatchingVendors lists the vendors that have ops in dispatching (the partial index
// oncebox_op_unresolved keeps this cheap), so that each gets its own stuck cutoff.
const sqlDispatchingVendors = `SELECT DISTINCT vendor FROM oncebox_op WHERE status = 'dispatching'`

// sqlStuckDispatching selects ops in dispatching whose attempt started before their
// vendor's cutoff ($1: vendor names, $2: cutoffs) and for which no dispatch job runs.
const sqlStuckDispatching = `
SELECT o.id::text, o.tenant_id, o.vendor, o.dispatch_started_at
FROM oncebox_op o
JOIN unnest($1::text[], $2::timestamptz[]) AS c(vendor, cutoff) ON c.vendor = o.vendor
WHERE o.status = 'dispatching' AND o.dispatch_started_at < c.cutoff
	AND NOT EXISTS (SELECT 1 FROM river_job j
		WHERE j.kind = 'oncebox.dispatch' AND j.args->>'op_id' = o.id::text AND j.state = 'running')
ORDER BY o.dispatch_started_at
LIMIT $3`

// sqlMarkStuckUnknown moves one stuck op to unknown, only if it is still the same stuck
// attempt and still has no running job. The attempt token is kept, so a predecessor that
// was slow rather than dead may still record a definite answer.
const sqlMarkStuckUnknown = `
UPDATE oncebox_op o SET status = 'unknown', next_check_at = NULL, updated_at = now()
WHERE o.id = $1 AND o.status = 'dispatching' AND o.dispatch_started_at = $2
	AND NOT EXISTS (SELECT 1 FROM river_job j
		WHERE j.kind = 'oncebox.dispatch' AND j.args->>'op_id' = o.id::text AND j.state = 'running')
RETURNING o.id`

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

// candidateSelect is what the sweeper needs to know about an op before its lookup: the
// op, whether its full args are sealed (its stored args are then the redacted form),
// when its first attempt started, when its last finished attempt ended, and when the
// latest attempt that never finished (its worker died) started.
const candidateSelect = `
SELECT o.id::text, o.tenant_id, o.idempotency_key, o.tool, o.vendor, o.args, coalesce(o.vendor_ref, ''),
	o.status, coalesce(o.attempt_token::text, ''), o.attempts, o.generation, o.stale_key, o.created_at,
	o.sealed_args IS NOT NULL, o.dispatch_started_at, a.first_started, a.unfinished_started, a.last_finished
FROM oncebox_op o
LEFT JOIN LATERAL (SELECT min(started_at) AS first_started,
		max(started_at) FILTER (WHERE finished_at IS NULL) AS unfinished_started,
		max(finished_at) AS last_finished
	FROM oncebox_attempt WHERE op_id = o.id) a ON true
WHERE o.id = $1`

// sqlCandidate reads one op for the sweeper.
const sqlCandidate = candidateSelect

// sqlCandidateForUpdate reads and locks one op for a decision.
const sqlCandidateForUpdate = candidateSelect + ` FOR UPDATE OF o`

// sqlAdopt records the object the vendor holds as the op's outcome: succeeded with
// result $3 (error NULL), or failed with error $4 (result NULL). $5 replaces the args
// with their redacted form when the tool redacts and the stored args are the full ones.
// The op is terminal: the sealed copy of its full args is dropped.
const sqlAdopt = `
UPDATE oncebox_op SET status = $2, result = $3, error = $4, vendor_ref = nullif($6, ''),
	args = coalesce($5, args), sealed_args = NULL, attempt_token = NULL, next_check_at = NULL, updated_at = now()
WHERE id = $1`

// sqlResend sends an op back to pending for the worker to dispatch again. When $2 is
// true the op moves to a new generation with the vendor key $3.
const sqlResend = `
UPDATE oncebox_op SET status = 'pending', attempt_token = NULL, next_check_at = NULL, updated_at = now(), resend_before = NULL,
	generation = CASE WHEN $2 THEN generation + 1 ELSE generation END,
	vendor_key = CASE WHEN $2 THEN $3 ELSE vendor_key END,
	key_first_sent_at = CASE WHEN $2 THEN NULL ELSE key_first_sent_at END,
	stale_key = CASE WHEN $2 THEN false ELSE stale_key END
WHERE id = $1`

// sqlToReview hands an op to a person.
const sqlToReview = `
UPDATE oncebox_op SET status = 'needs_review', next_check_at = NULL, updated_at = now() WHERE id = $1`

// sqlCheckLater keeps an op unknown and sets its next check.
const sqlCheckLater = `UPDATE oncebox_op SET next_check_at = $2, updated_at = now() WHERE id = $1`

const sqlInsertEvent = `
INSERT INTO oncebox_op_event (op_id, kind, from_status, to_status, actor, detail)
VALUES ($1, $2, nullif($3, ''), nullif($4, ''), nullif($5, ''), $6)`

// sqlListReview lists the ops waiting for a person, with their latest event or, when
// the worker sent them there, the error it recorded. $1 = 0 lists every tenant.
const sqlListReview = `
SELECT o.id::text, o.idempotency_key, o.tool, o.vendor, o.tenant_id, o.attempts, o.updated_at,
	coalesce(e.kind || ': ' || coalesce(e.detail->>'decision', e.detail->>'reason', ''),
		'dispatch: ' || coalesce(o.error->>'code', o.error->>'message', ''), '')
FROM oncebox_op o
LEFT JOIN LATERAL (SELECT ev.kind, ev.detail FROM oncebox_op_event ev
	WHERE ev.op_id = o.id ORDER BY ev.id DESC LIMIT 1) e ON true
WHERE o.status = 'needs_review' AND ($1 = 0 OR o.tenant_id = $1)
ORDER BY o.updated_at, o.id`

// sqlReviewOpForUpdate locks the tenant's op under a key for a manual resolution, and
// says whether its full args are sealed (its stored args are then the redacted form).
const sqlReviewOpForUpdate = `
SELECT id::text, tool, vendor, status, generation, stale_key, args, sealed_args IS NOT NULL
FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key = $2 FOR UPDATE`

// sqlReportOps lists the ops created in [since, until), of one tenant or ($3 = 0) all,
// with the latest moment the vendor may have created an object for each: the end of
// its last finished attempt or, when an attempt never finished (its worker died and the
// reconciler or a person resolved the op), the op's last change; NULL without attempts.
const sqlReportOps = `
SELECT o.id::text, o.tenant_id, o.idempotency_key, o.tool, o.vendor, o.status, o.args, coalesce(o.vendor_ref, ''),
	(SELECT greatest(max(a.finished_at), CASE WHEN bool_or(a.finished_at IS NULL) THEN o.updated_at END)
		FROM oncebox_attempt a WHERE a.op_id = o.id)
FROM oncebox_op o
WHERE o.created_at >= $1 AND o.created_at < $2 AND ($3 = 0 OR o.tenant_id = $3)`

// sqlReportOpsByID reads the ops that vendor tags name outside the window.
const sqlReportOpsByID = `
SELECT id::text, tenant_id, status, created_at, args FROM oncebox_op WHERE id = ANY($1::uuid[])`

// sqlCheckSoon makes the unknown ops among $1 due for a check now. An op a running
// sweep holds may then be checked twice at once, which is harmless: each decision is
// recorded only if the op is still unknown under the same attempt token.
const sqlCheckSoon = `
UPDATE oncebox_op SET next_check_at = now()
WHERE id = ANY($1::uuid[]) AND status = 'unknown' AND next_check_at > now()`
