package steps

// The step runner's SQL. The run's state changes go through internal/opstate
// (ApplyStep), which owns oncebox_step_run's updates.

// sqlParentForUpdate reads and locks a composite op with the steps stored with it.
const sqlParentForUpdate = `SELECT id::text, tenant_id, status, args, coalesce(conversation_id, ''),
	coalesce(tool_call_id, ''), tool_definition FROM oncebox_op WHERE id = $1 FOR UPDATE`

// sqlParentSteps reads the steps stored with a composite op and its run's state.
const sqlParentSteps = `SELECT o.tool_definition, coalesce(r.state, ''), coalesce(r.failed_step, '')
FROM oncebox_op o LEFT JOIN oncebox_step_run r ON r.op_id = o.id WHERE o.id = $1`

// sqlStepRunInsert starts a composite op's run, unless it has one.
const sqlStepRunInsert = `INSERT INTO oncebox_step_run (op_id) VALUES ($1) ON CONFLICT (op_id) DO NOTHING`

// sqlStepRunLock reads and locks a composite op's run.
const sqlStepRunLock = `SELECT state, coalesce(failed_step, '') FROM oncebox_step_run WHERE op_id = $1 FOR UPDATE`

// sqlStepOps reads the ops of a composite op's steps: the tenant's ops whose key begins
// with the parent's step prefix ($2, which holds no LIKE wildcard but '_', escaped).
const sqlStepOps = `SELECT id::text, idempotency_key, status, coalesce(vendor_ref, ''), result FROM oncebox_op
WHERE tenant_id = $1 AND idempotency_key LIKE replace($2, '_', '\_') || '%'`

// sqlStepTombstones reads the keys of a composite op's steps whose ops were purged (a
// tombstone under the key, as sqlStepOps reads the ops): the purge keeps a step's op while
// its parent is not settled, so a tombstone here means a run older than that rule, or a
// parent settled and released by hand; the runner never sends such a step again.
const sqlStepTombstones = `SELECT idempotency_key FROM oncebox_tombstone
WHERE tenant_id = $1 AND idempotency_key LIKE replace($2, '_', '\_') || '%'`
