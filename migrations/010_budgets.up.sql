-- Budgets: what each budget admitted in a fixed window, per tenant, scope (the tenant, an
-- API token, a conversation) and currency ('' is the count of ops). Enqueues upsert
-- their row and so queue on its lock: concurrent ops in any process are admitted
-- exactly up to the limit. Rows of past windows are deleted by the purge job.
CREATE TABLE oncebox_budget_usage (
    tenant_id    bigint      NOT NULL REFERENCES oncebox_tenant (id) ON DELETE CASCADE,
    budget       text        NOT NULL,
    scope        text        NOT NULL,
    currency     text        NOT NULL,
    window_start timestamptz NOT NULL,
    window_end   timestamptz NOT NULL,
    ops          bigint      NOT NULL DEFAULT 0,
    amount       bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, budget, scope, currency, window_start)
);
CREATE INDEX oncebox_budget_usage_window_end ON oncebox_budget_usage (window_end);
