-- The sweeper's and the review list's work, found without an index on a column that a
-- clean dispatch changes (issue 46). A clean dispatch is one update of the op row,
-- pending to terminal, and the three partial indexes on status (oncebox_op_pending,
-- oncebox_op_unresolved, oncebox_op_review) make that update write an entry in every
-- index of the table: Postgres updates in place (HOT) only when no indexed column
-- changes, and a partial index's predicate counts as indexed. From v0.2.0 the sweeper
-- and the review list read what this migration adds instead, so that v0.3.0 can drop
-- those indexes. Each addition stays untouched by a clean dispatch:
--
-- * oncebox_op_due: the ops the sweeper must look at, and from when. An op enters it
--   when it is claimed (pending to dispatching: the locking path, never a clean run),
--   and when its dispatch job leaves River's running state or finishes (rescued,
--   taken over, retried, completed, discarded, cancelled) or is deleted before it ran,
--   while the op is not terminal: that is how a pending op can lose its job and a
--   dispatching op its worker. A clean run deletes its running job in the statement
--   that settles the op, which adds nothing. The sweeper evaluates each entry as
--   before (reconcile: stuck dispatching, jobless pending) and deletes it, or moves
--   its due time; a trigger that fires meanwhile rewrites the row, so that the
--   sweeper's delete (conditional on the row version it read) leaves it.
-- * oncebox_op.review_since, set while an op needs review, with a partial index
--   NULL on the clean path: the review list.
-- * oncebox_op_check, a partial index on next_check_at, which only an unknown op has:
--   an unknown op gets a due time when it is left without one (a v0.1.0 binary does
--   that), so that the sweeper's lease needs no status index.
--
-- Triggers, not code, feed all three, so that v0.1.0 binaries running beside v0.2.0
-- during a rolling upgrade feed them too. The existing rows are backfilled here.
-- Expand-only: a table, a column, an index and triggers.

CREATE TABLE IF NOT EXISTS oncebox_op_due (
    op_id  uuid        PRIMARY KEY,
    due_at timestamptz NOT NULL DEFAULT now(),
    -- why is what put the op here, for an operator reading the table.
    why    text        NOT NULL
);
CREATE INDEX IF NOT EXISTS oncebox_op_due_at ON oncebox_op_due (due_at);

CREATE OR REPLACE FUNCTION oncebox_op_due_claimed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncebox_op_due AS d (op_id, why) VALUES (NEW.id, 'claimed')
    ON CONFLICT (op_id) DO UPDATE SET due_at = least(d.due_at, EXCLUDED.due_at), why = EXCLUDED.why;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_op_due_claimed AFTER UPDATE OF status ON oncebox_op
    FOR EACH ROW WHEN (NEW.status = 'dispatching' AND OLD.status IS DISTINCT FROM 'dispatching')
    EXECUTE FUNCTION oncebox_op_due_claimed();

-- A job's op is named by its args' op_id; a job whose op_id is not a uuid (not one of
-- ours) is ignored rather than failing River's statement. An op that is terminal
-- needs nothing; one that is not is evaluated by the sweeper, which tells a live job
-- from a lost one.
CREATE OR REPLACE FUNCTION oncebox_op_due_job() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    j  river_job;
    op uuid;
BEGIN
    IF TG_OP = 'DELETE' THEN
        j := OLD;
    ELSE
        j := NEW;
    END IF;
    IF coalesce(j.args->>'op_id', '') !~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN
        RETURN NULL;
    END IF;
    op := (j.args->>'op_id')::uuid;
    IF EXISTS (SELECT 1 FROM oncebox_op WHERE oncebox_op.id = op
            AND status NOT IN ('succeeded', 'failed', 'rejected')) THEN
        INSERT INTO oncebox_op_due AS d (op_id, why)
        VALUES (op, 'job ' || j.id || CASE WHEN TG_OP = 'DELETE' THEN ' deleted' ELSE ' ' || j.state END)
        ON CONFLICT (op_id) DO UPDATE SET due_at = least(d.due_at, EXCLUDED.due_at), why = EXCLUDED.why;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_op_due_job_state AFTER UPDATE OF state ON river_job
    FOR EACH ROW WHEN (OLD.kind IN ('oncebox.dispatch', 'oncebox.steps') AND OLD.state IS DISTINCT FROM NEW.state
        AND (OLD.state = 'running' OR NEW.state IN ('completed', 'discarded', 'cancelled')))
    EXECUTE FUNCTION oncebox_op_due_job();

-- A running job is deleted only by the record that settles its op (opstate's clean
-- record), and a finished one only after it finished (which already fired the trigger
-- above): neither needs the sweeper.
CREATE OR REPLACE TRIGGER oncebox_op_due_job_delete AFTER DELETE ON river_job
    FOR EACH ROW WHEN (OLD.kind IN ('oncebox.dispatch', 'oncebox.steps')
        AND OLD.state NOT IN ('running', 'completed', 'discarded', 'cancelled'))
    EXECUTE FUNCTION oncebox_op_due_job();

-- The backfill: every op that could have lost its job or its worker before this
-- migration.
INSERT INTO oncebox_op_due (op_id, why)
SELECT id, 'backfill ' || status FROM oncebox_op WHERE status IN ('pending', 'dispatching')
ON CONFLICT (op_id) DO NOTHING;

ALTER TABLE oncebox_op ADD COLUMN IF NOT EXISTS review_since timestamptz;
CREATE INDEX IF NOT EXISTS oncebox_op_review_since ON oncebox_op (tenant_id, review_since)
    WHERE review_since IS NOT NULL;

CREATE OR REPLACE FUNCTION oncebox_op_review_since() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'needs_review' THEN
        NEW.review_since := now();
    ELSE
        NEW.review_since := NULL;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_op_review_since_insert BEFORE INSERT ON oncebox_op
    FOR EACH ROW WHEN (NEW.status = 'needs_review')
    EXECUTE FUNCTION oncebox_op_review_since();
CREATE OR REPLACE TRIGGER oncebox_op_review_since_update BEFORE UPDATE OF status ON oncebox_op
    FOR EACH ROW WHEN ((OLD.status = 'needs_review') IS DISTINCT FROM (NEW.status = 'needs_review'))
    EXECUTE FUNCTION oncebox_op_review_since();

UPDATE oncebox_op SET review_since = updated_at WHERE status = 'needs_review' AND review_since IS NULL;

CREATE OR REPLACE FUNCTION oncebox_op_check_now() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.next_check_at := now();
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_op_check_now BEFORE INSERT OR UPDATE ON oncebox_op
    FOR EACH ROW WHEN (NEW.status = 'unknown' AND NEW.next_check_at IS NULL)
    EXECUTE FUNCTION oncebox_op_check_now();

UPDATE oncebox_op SET next_check_at = now() WHERE status = 'unknown' AND next_check_at IS NULL;
CREATE INDEX IF NOT EXISTS oncebox_op_check ON oncebox_op (next_check_at) WHERE next_check_at IS NOT NULL;
