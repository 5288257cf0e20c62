package reconcile

// The reconciler's queries, all of them: they select candidates, then touch each op by
// its id as the dispatch worker does; every status change goes through opstate.

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

// sqlJoblessPending selects pending ops, unchanged since $1, whose latest dispatch job
// is not live (available, pending, scheduled, running, retryable): it was deleted (no
// row), finished while the op went back to pending, discarded or cancelled. It returns
// that job's state (empty when there is none), its attempts, its last error, and
// whether it may have called the vendor without its answer being recorded: it is gone,
// or ran more often than the op heard (a clean run calls with no claim commit, see
// opstate.CleanRunSQL). The
// partial index oncebox_op_pending lists the pending ops. Only the $2 oldest pending
// ops are looked at per sweep: finding an op's jobs is not cheap (measured: about 9 ms
// per op against 10,000 jobs on the test machine), so the work is bounded per sweep.
const sqlJoblessPending = `
SELECT o.id::text, o.vendor, coalesce(j.state::text, ''), coalesce(j.attempt, 0), coalesce(j.errors[array_upper(j.errors, 1)]->>'error', ''),
	j.id IS NULL OR (j.attempt > 0 AND NOT (o.heard_job_id IS NOT DISTINCT FROM j.id AND j.attempt <= o.heard_job_attempt))
FROM (SELECT id, vendor, updated_at, heard_job_id, heard_job_attempt FROM oncebox_op WHERE status = 'pending' AND updated_at < $1
	ORDER BY updated_at LIMIT $2) o
LEFT JOIN LATERAL (SELECT j.id, j.state, j.attempt, j.errors FROM river_job j
	WHERE j.kind IN ('oncebox.dispatch', 'oncebox.steps') AND j.args @> jsonb_build_object('op_id', o.id::text)
	ORDER BY j.id DESC LIMIT 1) j ON true
WHERE j.state IS NULL OR j.state NOT IN ('available', 'pending', 'scheduled', 'running', 'retryable')
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
