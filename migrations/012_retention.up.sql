-- An op's retention clock starts when it becomes terminal: retention is how long it is
-- kept from then (its tool's TTL), and the transition that makes it terminal sets
-- expires_at to now() + retention. Until then expires_at is created_at + TTL, a lower
-- bound; ops stored before this column existed use that difference as their retention.
ALTER TABLE oncebox_op ADD COLUMN IF NOT EXISTS retention interval;

-- A tombstone remembers the last generation of the purged op, so that a new op under
-- the same key starts at the next one and never derives the purged op's vendor key.
ALTER TABLE oncebox_tombstone ADD COLUMN IF NOT EXISTS generation integer NOT NULL DEFAULT 0;

-- The sweeper's list of pending ops that may have lost their dispatch job.
CREATE INDEX IF NOT EXISTS oncebox_op_pending ON oncebox_op (updated_at) WHERE status = 'pending';
