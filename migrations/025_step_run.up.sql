-- The run of a composite op's steps (docs/steps.md): a composite op is an ordinary op of
-- the vendor "steps" whose steps are ops of their own, under keys derived from its id
-- (outbox.StepKey), so the run keeps only its state machine's state (internal/opstate's
-- step table) and the step that failed for good. Its steps' progress is read from their
-- ops. Expand-only: a new table, which v0.1.0 never reads.
CREATE TABLE IF NOT EXISTS oncebox_step_run (
    op_id       uuid        PRIMARY KEY REFERENCES oncebox_op (id) ON DELETE CASCADE,
    state       text        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'succeeded', 'failed',
                                'compensating', 'compensated', 'needs_review')),
    failed_step text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
