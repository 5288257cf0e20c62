-- A clean run's attempt, folded into its op's row (issue 46). A clean run that settles
-- its op (succeeded or failed, no claim commit, no earlier run unheard) writes today an
-- attempt row that repeats what the op row already holds: its number (attempts), its
-- start (dispatch_started_at), its job (heard_job_id), its key (vendor_key), the
-- object (vendor_ref), the outcome (the status) and the error. That row and its two
-- index entries are about a seventh of a dispatch's WAL (BenchmarkWAL). From v0.3.0 such
-- a run writes no row but sets clean_finished_at, the one fact the op row lacks; v0.2.0
-- only reads it, so that every binary that may run beside v0.3.0 shows the same history:
-- an op's attempts are its rows plus, when clean_finished_at is set, the latest one,
-- read off the op row (internal/opstate.AttemptsSQL).
--
-- The folded attempt is read off columns a later change of the op would overwrite, so
-- whatever changes one of them first writes the folded attempt as a row of its own and
-- clears clean_finished_at: a trigger, so that a v0.2.0 binary reopening an op a v0.3.0
-- binary folded (a person's retry) keeps its history too. Expand-only: a column and a
-- trigger that fires only on rows with the column set, which no v0.2.0 binary sets.

ALTER TABLE oncebox_op ADD COLUMN IF NOT EXISTS clean_finished_at timestamptz;

CREATE OR REPLACE FUNCTION oncebox_op_unfold_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, job_id, started_at, finished_at, outcome, error, vendor_ref)
    VALUES (OLD.id, OLD.attempts, gen_random_uuid(), OLD.vendor_key, nullif(OLD.heard_job_id, -1),
        coalesce(OLD.dispatch_started_at, OLD.clean_finished_at), OLD.clean_finished_at,
        CASE WHEN OLD.status = 'succeeded' THEN 'succeeded' ELSE 'permanent' END,
        CASE WHEN OLD.status = 'succeeded' THEN NULL ELSE coalesce(OLD.error->>'message', OLD.error->>'code') END,
        OLD.vendor_ref);
    -- A change that folds a newer clean run sets its own time; any other unfolds.
    IF NEW.clean_finished_at IS NOT DISTINCT FROM OLD.clean_finished_at THEN
        NEW.clean_finished_at := NULL;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_op_unfold_attempt BEFORE UPDATE ON oncebox_op
    FOR EACH ROW WHEN (OLD.clean_finished_at IS NOT NULL
        AND (NEW.status IS DISTINCT FROM OLD.status OR NEW.attempts IS DISTINCT FROM OLD.attempts
            OR NEW.vendor_ref IS DISTINCT FROM OLD.vendor_ref OR NEW.vendor_key IS DISTINCT FROM OLD.vendor_key
            OR NEW.dispatch_started_at IS DISTINCT FROM OLD.dispatch_started_at
            OR NEW.heard_job_id IS DISTINCT FROM OLD.heard_job_id OR NEW.error::text IS DISTINCT FROM OLD.error::text))
    EXECUTE FUNCTION oncebox_op_unfold_attempt();
