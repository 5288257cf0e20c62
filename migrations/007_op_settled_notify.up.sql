-- Waiters (?wait= long polls) are woken by a notification when an op settles, instead
-- of polling: one NOTIFY per settling transaction, delivered at commit. The payload is
-- "<tenant_id>:<idempotency_key>". A listener that misses notifications (it was
-- reconnecting) re-reads every op it waits for.
CREATE FUNCTION oncebox_op_notify_settled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('oncebox_op_settled', NEW.tenant_id::text || ':' || NEW.idempotency_key);
    RETURN NULL;
END
$$;

CREATE TRIGGER oncebox_op_settled AFTER UPDATE OF status ON oncebox_op
    FOR EACH ROW
    WHEN (NEW.status IS DISTINCT FROM OLD.status
          AND NEW.status IN ('succeeded', 'failed', 'rejected', 'needs_review', 'awaiting_approval'))
    EXECUTE FUNCTION oncebox_op_notify_settled();
