-- The installation's own approval rules and budgets, stored: the defaults a tenant's
-- rules (oncebox_approval_policy) and budgets (oncebox_tenant_budget) override. Before
-- this table each process read them from its own flags (--approval-policy,
-- --refund-approval-above, --budgets), so a serve and the CLI beside it could disagree
-- about the rule in force (issue 43). Now the flags only seed a row at serve's start
-- when none is stored under that tool or budget name; `oncebox policy` shows and
-- changes them. kind is 'approval' (name: the tool, body: governance.ApprovalRule) or
-- 'budget' (name: the budget's, body: governance.Budget). Every change takes a new
-- version from one sequence, never reused: the enqueue reads the newest version and the
-- count with the op's insert, and a process reads the rows again when they differ from
-- what it remembers.
-- Expand-only: a new sequence and a new table, which v0.1.0 never reads or writes (it
-- keeps applying its own flags during a rolling upgrade; a rule stored equal to its
-- flags has the same version, default:<hash of the rule>, so approvals of ops held by
-- either release are honoured by the other).
CREATE SEQUENCE IF NOT EXISTS oncebox_installation_policy_version;
CREATE TABLE IF NOT EXISTS oncebox_installation_policy (
    kind       text        NOT NULL CHECK (kind IN ('approval', 'budget')),
    name       text        NOT NULL,
    body       jsonb       NOT NULL,
    version    bigint      NOT NULL DEFAULT nextval('oncebox_installation_policy_version'),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text        NOT NULL,
    PRIMARY KEY (kind, name)
);
