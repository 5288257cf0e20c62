-- The River client id of the process that claimed an attempt on the locking path (the
-- claim commit before the vendor call). A process whose id starts with
-- 'oncebox_live_' holds a session advisory lock on the key
-- hashtextextended('oncebox.process:' || id, 0) while it lives (outbox's liveness), so
-- that another process can prove it gone: its attempt is then over at once, without
-- waiting for its job timeout. NULL on attempts stored before, and on those of a
-- process that holds no such lock (the previous release): they are waited for until
-- their job timeout, as before. Nullable: this adds no rewrite, and the previous
-- release, which does not name the column, runs unchanged on this schema.
ALTER TABLE oncebox_attempt ADD COLUMN worker text;
