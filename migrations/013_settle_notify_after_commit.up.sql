-- The dispatch worker's record of a vendor's answer notifies long polls after its commit,
-- in one batched statement that writes nothing, instead of from the settle trigger
-- inside the record's transaction: a notifying transaction holds Postgres's global
-- notification lock until its commit's WAL flush is over, so concurrent records
-- committed one at a time (measured: 30-60% of end-to-end dispatch throughput). The
-- record statement sets oncebox.notify_settled to 'off' for its own transaction; every
-- other status change (the reconciler, approvals, reviews, SQL by hand) still notifies
-- from the trigger. A notification lost to a crash between the commit and the batched
-- notify costs a waiter its next recheck (api: every 10 s), never an answer.
CREATE OR REPLACE FUNCTION oncebox_op_notify_settled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('oncebox.notify_settled', true) = 'off' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('oncebox_op_settled', NEW.tenant_id::text || ':' || NEW.idempotency_key);
    RETURN NULL;
END
$$;
