-- Approvals: which ops wait for a person is a per-tool policy, per tenant (these rows)
-- over a process-wide default (configuration). Every change of a tenant's rule takes a
-- new version from one sequence, so a version is never reused, even after a delete.
CREATE SEQUENCE oncebox_approval_policy_version;
CREATE TABLE oncebox_approval_policy (
    tenant_id  bigint      NOT NULL REFERENCES oncebox_tenant (id) ON DELETE CASCADE,
    tool       text        NOT NULL,
    rule       jsonb       NOT NULL,
    version    bigint      NOT NULL DEFAULT nextval('oncebox_approval_policy_version'),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, tool)
);

-- One row per op that had to wait for a person: the policy version and fingerprint the
-- approval is bound to, how many distinct approvers it needs, why it waits, until when,
-- and how it ended (approved, rejected, expired; NULL while it waits).
CREATE TABLE oncebox_approval (
    op_id            uuid        PRIMARY KEY REFERENCES oncebox_op (id) ON DELETE CASCADE,
    tenant_id        bigint      NOT NULL,
    policy_version   text        NOT NULL,
    fingerprint      bytea       NOT NULL,
    approvers_needed integer     NOT NULL DEFAULT 1 CHECK (approvers_needed >= 1),
    why              text        NOT NULL,
    requested_at     timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    decision         text        CHECK (decision IN ('approved', 'rejected', 'expired')),
    decided_at       timestamptz
);
CREATE INDEX oncebox_approval_waiting ON oncebox_approval (tenant_id, requested_at) WHERE decision IS NULL;
CREATE INDEX oncebox_approval_expiry ON oncebox_approval (expires_at) WHERE decision IS NULL;

-- The approvals given so far, one per distinct approver (four-eyes needs two).
CREATE TABLE oncebox_approval_vote (
    op_id    uuid        NOT NULL REFERENCES oncebox_op (id) ON DELETE CASCADE,
    voter    text        NOT NULL,
    at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (op_id, voter)
);

-- Ops already waiting keep waiting, bound to no policy version, for the default 72 hours.
INSERT INTO oncebox_approval (op_id, tenant_id, policy_version, fingerprint, why, requested_at, expires_at)
SELECT id, tenant_id, 'legacy', fingerprint, 'It waited for approval before approval policies were recorded.',
    updated_at, now() + interval '72 hours'
FROM oncebox_op WHERE status = 'awaiting_approval';
