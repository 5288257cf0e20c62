package governance

// Tenant policies (policy.go).

const sqlTenantRule = `SELECT rule, version FROM oncebox_approval_policy WHERE tenant_id = $1 AND tool = $2`

const sqlSetTenantRule = `
INSERT INTO oncebox_approval_policy (tenant_id, tool, rule) VALUES ($1, $2, $3)
ON CONFLICT (tenant_id, tool) DO UPDATE
	SET rule = EXCLUDED.rule, version = nextval('oncebox_approval_policy_version'), updated_at = now()
RETURNING version`

const sqlClearTenantRule = `DELETE FROM oncebox_approval_policy WHERE tenant_id = $1 AND tool = $2`

// Budgets (budget.go). A window starts at a multiple of its length since 2000-01-01
// UTC, by the database's clock (now() is the transaction's start: one window per
// transaction).

const budgetWindowStart = `date_bin(make_interval(secs => $5), now(), timestamptz '2000-01-01 00:00:00+00')`

// sqlBudgetCharge counts one op ($6: its amount) in the current window of a budget's
// row, only while the row stays within $7 ops and $8 amount; no row back means over.
const sqlBudgetCharge = `
INSERT INTO oncebox_budget_usage AS u (tenant_id, budget, scope, currency, window_start, window_end, ops, amount)
SELECT $1, $2, $3, $4, ` + budgetWindowStart + `, ` + budgetWindowStart + ` + make_interval(secs => $5), 1, $6::bigint
WHERE 1 <= $7::bigint AND $6::bigint <= $8::bigint
ON CONFLICT (tenant_id, budget, scope, currency, window_start) DO UPDATE
	SET ops = u.ops + 1, amount = u.amount + EXCLUDED.amount
	WHERE u.ops + 1 <= $7::bigint AND u.amount + EXCLUDED.amount <= $8::bigint
RETURNING ops, amount`

// sqlBudgetUndo gives back one op's charge (it turned out to be a replay, or another
// budget refused it), in the same transaction and so the same window.
const sqlBudgetUndo = `
UPDATE oncebox_budget_usage SET ops = ops - 1, amount = amount - $6
WHERE tenant_id = $1 AND budget = $2 AND scope = $3 AND currency = $4 AND window_start = ` + budgetWindowStart

const sqlBudgetWindowLeft = `SELECT extract(epoch FROM date_bin(make_interval(secs => $1), now(), timestamptz '2000-01-01 00:00:00+00')
	+ make_interval(secs => $1) - now())::float8`

const sqlBudgetWindow = `SELECT date_bin(make_interval(secs => $1), now(), timestamptz '2000-01-01 00:00:00+00'),
	date_bin(make_interval(secs => $1), now(), timestamptz '2000-01-01 00:00:00+00') + make_interval(secs => $1)`

const sqlBudgetUsage = `
SELECT scope, currency, ops, amount, window_start, window_end FROM oncebox_budget_usage
WHERE tenant_id = $1 AND budget = $2
	AND window_start = date_bin(make_interval(secs => $3), now(), timestamptz '2000-01-01 00:00:00+00')
ORDER BY scope, currency`
