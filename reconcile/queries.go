package reconcile

// The reconciler's queries, all of them: they select candidates, then touch each op by
// its id as the dispatch worker does; every status change goes through opstate.

// sqlDue lists the ops due for the sweeper's look (oncebox_op_due, migration 036: an
// op enters it when it is claimed, or when its dispatch job stops running, finishes or
// is deleted before it ran, while the op is not terminal), oldest due first, at most
// $2, with the version of each entry (its xmin) so that the sweeper's delete or
// reschedule leaves an entry a trigger rewrote meanwhile. An op that is gone (purged)
// has an empty status.
const sqlDue = `
SELECT d.op_id::text, d.xmin::text, coalesce(o.status, ''), coalesce(o.vendor, ''), o.dispatch_started_at, o.updated_at
FROM oncebox_op_due d LEFT JOIN oncebox_op o ON o.id = d.op_id
WHERE d.due_at <= $1
ORDER BY d.due_at
LIMIT $2`

// sqlDueDone removes the entries ($1 op ids, $2 their versions as read) the sweeper is
// done with, unless a trigger rewrote them since.
const sqlDueDone = `
DELETE FROM oncebox_op_due d USING unnest($1::uuid[], $2::text[]) AS x(op_id, version)
WHERE d.op_id = x.op_id AND d.xmin::text = x.version`

// sqlDueLater moves the entries ($1 op ids, $2 their versions as read) to their next
// due time ($3), unless a trigger rewrote them since (it kept the earlier time).
const sqlDueLater = `
UPDATE oncebox_op_due d SET due_at = x.due_at
FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS x(op_id, version, due_at)
WHERE d.op_id = x.op_id AND d.xmin::text = x.version`

// sqlStuckDispatching selects, among the ops $1 with their vendor's cutoffs $2, those
// in dispatching whose attempt started before the cutoff and for which no dispatch job
// runs. It reads no index on River's args: the running jobs are found by state, the
// first column of River's river_job_prioritized_fetching_index, and there are at most
// as many as workers (docs/performance.md, River's GIN indexes).
const sqlStuckDispatching = `
SELECT o.id::text
FROM oncebox_op o
JOIN unnest($1::uuid[], $2::timestamptz[]) AS c(id, cutoff) ON c.id = o.id
WHERE o.status = 'dispatching' AND o.dispatch_started_at < c.cutoff
	AND NOT EXISTS (SELECT 1 FROM river_job j
		WHERE j.kind = 'oncebox.dispatch' AND j.args->>'op_id' = o.id::text AND j.state = 'running')`

// liveJobKey is River's unique_key of the job of kind k.kind for op o, written as River
// v0.51's dbunique builds it for a unique insert by args (UniqueOpts.ByArgs): the SHA-256
// of "&kind=<kind>&args=<the unique args, keys sorted, compact JSON>". Both of an op's
// job kinds are unique by {"op_id": ...} alone: dispatch.Args tags only op_id unique,
// steps.Args has no other field. River keeps a job's unique_key for as long as the job
// is kept, and its partial index river_job_unique_idx holds the jobs in the states the
// insert named (the live ones), so one probe per op and kind says whether a live job
// exists without an index on args. TestLiveJobKeyIsRiversUniqueKey holds this equal to
// what River writes.
const liveJobKey = `sha256(convert_to('&kind=' || k.kind || '&args={"op_id":"' || o.id::text || '"}', 'UTF8'))`

// sqlJoblessPending selects, among the ops $2 (due, see sqlDue), the pending ones
// unchanged since $1 without a live dispatch or step runner job (available, pending,
// scheduled, running, retryable): it was deleted, finished while the op went back to
// pending, discarded or cancelled. For each it
// returns its latest job's state (empty when there is none), its attempts, its last
// error, and whether it may have called the vendor without its answer being recorded:
// it is gone, or ran more often than the op heard (a clean run calls with no claim
// commit, see opstate.CleanRunSQL). It reads no index on River's args (v0.3.0
// may drop them): the live jobs are found by River's unique key (liveJobKey), and only
// when some op has none are River's finished jobs read, in one pass for all such ops.
// An op has at most one live job of its kind (a unique insert), so its latest job is
// its live one when it has one, and its latest finished one otherwise.
const sqlJoblessPending = `
WITH o AS (
	SELECT o.id, o.vendor, o.updated_at, o.heard_job_id, o.heard_job_attempt
	FROM (SELECT id, vendor, updated_at, heard_job_id, heard_job_attempt FROM oncebox_op
		WHERE id = ANY($2::uuid[]) AND status = 'pending' AND updated_at < $1) o
	WHERE NOT EXISTS (SELECT 1 FROM unnest(ARRAY['oncebox.dispatch', 'oncebox.steps']) AS k(kind)
		JOIN river_job j ON j.unique_key = ` + liveJobKey + `
		WHERE j.unique_states IS NOT NULL AND river_job_state_in_bitmask(j.unique_states, j.state))
), finished AS (
	SELECT DISTINCT ON (j.args->>'op_id') j.args->>'op_id' AS op_id, j.id, j.state, j.attempt, j.errors
	FROM river_job j
	WHERE EXISTS (SELECT 1 FROM o) AND j.state IN ('completed', 'discarded', 'cancelled')
		AND j.kind IN ('oncebox.dispatch', 'oncebox.steps') AND j.args->>'op_id' IN (SELECT id::text FROM o)
	ORDER BY j.args->>'op_id', j.id DESC
)
SELECT o.id::text, o.vendor, coalesce(j.state::text, ''), coalesce(j.attempt, 0), coalesce(j.errors[array_upper(j.errors, 1)]->>'error', ''),
	j.id IS NULL OR (j.attempt > 0 AND NOT (o.heard_job_id IS NOT DISTINCT FROM j.id AND j.attempt <= o.heard_job_attempt))
FROM o LEFT JOIN finished j ON j.op_id = o.id::text
ORDER BY o.updated_at`

// candidateSelect is what the reconciler needs to know about an op before its lookup: the
// op, whether its full args are sealed (its stored args are then the redacted form),
// when its first attempt started, when its last finished attempt ended, and when the
// latest attempt that never finished (its worker died) started.
const candidateSelect = `
SELECT o.id::text, o.tenant_id, o.idempotency_key, o.tool, o.vendor, o.args, coalesce(o.vendor_ref, ''),
	o.status, coalesce(o.attempt_token::text, ''), o.attempts, o.generation, o.stale_key, o.created_at,
	o.sealed_args IS NOT NULL, o.dispatch_started_at, a.first_started, a.unfinished_started, a.last_finished,
	coalesce(o.trace_parent, ''), coalesce(o.vendor_account, '')
FROM oncebox_op o
LEFT JOIN LATERAL (SELECT min(started_at) AS first_started,
		max(started_at) FILTER (WHERE finished_at IS NULL) AS unfinished_started,
		max(finished_at) AS last_finished
	FROM oncebox_attempt WHERE op_id = o.id) a ON true
WHERE o.id = $1`

// sqlCandidate reads one op for the reconciler.
const sqlCandidate = candidateSelect

// sqlCandidateForUpdate reads and locks one op for a decision.
const sqlCandidateForUpdate = candidateSelect + ` FOR UPDATE OF o`
