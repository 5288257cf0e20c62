package finance

// All of the package's SQL lives here: the report's queries, scoped by tenant when one
// is given.

// sqlReportOps lists the ops created in [since, until), of one tenant or ($3 = 0) all,
// with the latest moment the vendor may have created an object for each: the end of
// its last finished attempt or, when an attempt never finished (its worker died and the
// reconciler or a person resolved the op), the op's last change; NULL without attempts.
// A clean run folded into the op's row (migration 037) ended at clean_finished_at.
const sqlReportOps = `
SELECT o.id::text, o.tenant_id, o.idempotency_key, o.tool, o.vendor, o.status, o.args, coalesce(o.vendor_ref, ''),
	greatest((SELECT greatest(max(a.finished_at), CASE WHEN bool_or(a.finished_at IS NULL) THEN o.updated_at END)
		FROM oncebox_attempt a WHERE a.op_id = o.id), o.clean_finished_at),
	coalesce(o.vendor_account, '')
FROM oncebox_op o
WHERE o.created_at >= $1 AND o.created_at < $2 AND ($3 = 0 OR o.tenant_id = $3)`

// sqlReportOpsByID reads the ops that vendor tags name outside the window.
const sqlReportOpsByID = `
SELECT id::text, tenant_id, status, created_at, args FROM oncebox_op WHERE id = ANY($1::uuid[])`
