-- Budgets per tenant: a tenant's own budgets (governance.Budget as JSON), managed with
-- `oncebox tenant budget`, over the installation's default (--budgets): a tenant's
-- budget replaces the default of the same name, and its other budgets add to the
-- defaults. Every change takes a new version from one sequence, so a version is never
-- reused; the enqueue reads the tenant's newest version and count with the op's insert,
-- and a process reads the budgets again when they differ from what it remembers.
-- Expand-only: new tables, a nullable column and a trigger the previous release never
-- needs (it charges no rows the trigger gives back).
CREATE SEQUENCE IF NOT EXISTS oncebox_tenant_budget_version;
CREATE TABLE IF NOT EXISTS oncebox_tenant_budget (
    tenant_id  bigint      NOT NULL REFERENCES oncebox_tenant (id) ON DELETE CASCADE,
    name       text        NOT NULL,
    budget     jsonb       NOT NULL,
    version    bigint      NOT NULL DEFAULT nextval('oncebox_tenant_budget_version'),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text        NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

-- What each admitted op was charged, per usage row and window, so that an op that
-- fails or is rejected gives it back to the window it was charged in.
CREATE TABLE IF NOT EXISTS oncebox_budget_charge (
    op_id        uuid        NOT NULL REFERENCES oncebox_op (id) ON DELETE CASCADE,
    tenant_id    bigint      NOT NULL,
    budget       text        NOT NULL,
    scope        text        NOT NULL,
    currency     text        NOT NULL,
    window_start timestamptz NOT NULL,
    amount       bigint      NOT NULL,
    PRIMARY KEY (op_id, budget, scope, currency)
);

-- An op that becomes failed (the vendor said no, a person resolved it as not done) or
-- rejected gives its charges back, in the transaction of that status change, whichever
-- path made it. A charge whose window was purged gives back nothing.
CREATE OR REPLACE FUNCTION oncebox_budget_give_back() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (DELETE FROM oncebox_budget_charge WHERE op_id = NEW.id RETURNING *)
    UPDATE oncebox_budget_usage u SET ops = u.ops - 1, amount = u.amount - g.amount
    FROM gone g
    WHERE u.tenant_id = g.tenant_id AND u.budget = g.budget AND u.scope = g.scope
        AND u.currency = g.currency AND u.window_start = g.window_start;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_op_budget_give_back AFTER UPDATE OF status ON oncebox_op
    FOR EACH ROW
    WHEN (NEW.status IS DISTINCT FROM OLD.status AND NEW.status IN ('failed', 'rejected'))
    EXECUTE FUNCTION oncebox_budget_give_back();

-- The budget an op waits for approval because of (NULL: another reason), for the
-- console's count of ops each budget holds.
ALTER TABLE oncebox_approval ADD COLUMN IF NOT EXISTS budget text;
CREATE INDEX IF NOT EXISTS oncebox_approval_waiting_budget ON oncebox_approval (tenant_id, budget)
    WHERE decision IS NULL AND budget IS NOT NULL;
