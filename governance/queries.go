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
// row, only while the row stays within $7 ops and $8 amount; no row back means over. It
// records the charge of op $9 (none for an op without an id, asked about outside an
// enqueue), which the op gives back should it fail or be rejected (migration 022's
// trigger).
const sqlBudgetCharge = `
WITH charged AS (
	INSERT INTO oncebox_budget_usage AS u (tenant_id, budget, scope, currency, window_start, window_end, ops, amount)
	SELECT $1, $2, $3, $4, ` + budgetWindowStart + `, ` + budgetWindowStart + ` + make_interval(secs => $5), 1, $6::bigint
	WHERE 1 <= $7::bigint AND $6::bigint <= $8::bigint
	ON CONFLICT (tenant_id, budget, scope, currency, window_start) DO UPDATE
		SET ops = u.ops + 1, amount = u.amount + EXCLUDED.amount
		WHERE u.ops + 1 <= $7::bigint AND u.amount + EXCLUDED.amount <= $8::bigint
	RETURNING ops, amount, window_start
), c AS (
	INSERT INTO oncebox_budget_charge (op_id, tenant_id, budget, scope, currency, window_start, amount)
	SELECT nullif($9::text, '')::uuid, $1, $2, $3, $4, charged.window_start, $6::bigint FROM charged WHERE $9::text <> ''
)
SELECT ops, amount FROM charged`

// sqlBudgetUndo gives back one op's charge (another budget would not admit it), in the
// same transaction and so the same window, and forgets the charge of op $7.
const sqlBudgetUndo = `
WITH c AS (
	DELETE FROM oncebox_budget_charge WHERE op_id = nullif($7::text, '')::uuid AND budget = $2 AND scope = $3 AND currency = $4
)
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

// Tenant budgets (tenant_budget.go).

const sqlTenantBudgets = `SELECT budget, version, updated_at, updated_by FROM oncebox_tenant_budget WHERE tenant_id = $1 ORDER BY name`

const sqlSetTenantBudget = `
INSERT INTO oncebox_tenant_budget (tenant_id, name, budget, updated_by) VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, name) DO UPDATE
	SET budget = EXCLUDED.budget, updated_by = EXCLUDED.updated_by,
		version = nextval('oncebox_tenant_budget_version'), updated_at = now()`

const sqlDeleteTenantBudget = `DELETE FROM oncebox_tenant_budget WHERE tenant_id = $1 AND name = $2`

// sqlWaitingByBudget counts the tenant's ops waiting for a person because of each
// budget (an expired wait no longer counts, even before the expiry writes it).
const sqlWaitingByBudget = `
SELECT budget, count(*) FROM oncebox_approval
WHERE tenant_id = $1 AND decision IS NULL AND budget IS NOT NULL AND expires_at > now()
GROUP BY budget`

// The installation's stored policy (installation.go, migration 029).

const sqlInstalled = `SELECT kind, name, body, version, updated_at, updated_by FROM oncebox_installation_policy ORDER BY kind, name`

const sqlSetInstalled = `
INSERT INTO oncebox_installation_policy (kind, name, body, updated_by) VALUES ($1, $2, $3, $4)
ON CONFLICT (kind, name) DO UPDATE
	SET body = EXCLUDED.body, updated_by = EXCLUDED.updated_by,
		version = nextval('oncebox_installation_policy_version'), updated_at = now()`

const sqlDeleteInstalled = `DELETE FROM oncebox_installation_policy WHERE kind = $1 AND name = $2`

// sqlSeedInstalled stores a row unless one is stored under its kind and name, and says
// whether it did, with the row in force.
const sqlSeedInstalled = `
WITH ins AS (
	INSERT INTO oncebox_installation_policy (kind, name, body, updated_by) VALUES ($1, $2, $3, $4)
	ON CONFLICT (kind, name) DO NOTHING
	RETURNING body, updated_by
)
SELECT true, body, updated_by FROM ins
UNION ALL
SELECT false, body, updated_by FROM oncebox_installation_policy
WHERE kind = $1 AND name = $2 AND NOT EXISTS (SELECT 1 FROM ins)`
