-- A River snooze applied twice must not let one run's attempt number run twice (found by
-- make chaos: a SendGrid mail sent twice). River's snooze (JobSnooze) completes a run by
-- setting its job `scheduled` (or `available`) with attempt = the run's attempt - 1, so
-- that the next fetch runs the job again at the same attempt number, and metadata
-- snoozes = the count the run fetched + 1; River's completer applies it with
-- JobSetStateIfRunningMany, whose only guard is `state = 'running'`. When the completer's
-- batch times out on a cut network and is retried, the first send can still reach
-- Postgres once the network is back (TCP retransmits what was written), so the snooze is
-- applied twice: once to the run that snoozed, and once more to the next run of the job,
-- which it moves back to `scheduled` at the same attempt number. That run goes on (it
-- may be calling a vendor), and the job's next fetch runs the same attempt again. A
-- dispatch run whose attempt is the one after the op's last heard run is clean (it calls
-- its vendor without committing a claim, migration 016), so both runs call the vendor:
-- for a vendor without idempotency keys, a second side effect.
--
-- This trigger neutralizes such a stale snooze on oncebox's jobs: an update of a running
-- job that lowers its attempt (only a snooze does) is its own run's only if it lowers it
-- by one and raises the snooze count by one over what the row holds; otherwise it is an
-- earlier run's snooze applied again, and the row is left as it is (the update returns the
-- row unchanged, so that River's completer sees it done and moves on). Expand-only: a
-- function and a trigger that v0.3.0's binaries never notice.
CREATE OR REPLACE FUNCTION oncebox_river_stale_snooze() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_snoozes numeric := CASE WHEN jsonb_typeof(OLD.metadata->'snoozes') = 'number' THEN (OLD.metadata->>'snoozes')::numeric ELSE 0 END;
    new_snoozes numeric := CASE WHEN jsonb_typeof(NEW.metadata->'snoozes') = 'number' THEN (NEW.metadata->>'snoozes')::numeric ELSE 0 END;
BEGIN
    IF NEW.attempt = OLD.attempt - 1 AND new_snoozes = old_snoozes + 1 THEN
        RETURN NEW;
    END IF;
    RETURN OLD;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_river_stale_snooze BEFORE UPDATE ON river_job
    FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state IN ('scheduled', 'available') AND NEW.attempt < OLD.attempt
        AND OLD.kind IN ('oncebox.dispatch', 'oncebox.steps'))
    EXECUTE FUNCTION oncebox_river_stale_snooze();
