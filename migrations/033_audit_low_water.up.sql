-- The audit sealer's low-water mark (docs/audit.md "Tamper evidence"): every entry whose
-- seq is at or below oncebox_audit_mark.low is sealed, so a round reads only the log's
-- tail (a BRIN index on seq: entries are appended in about seq order, and its ranges
-- cost no WAL on insert) instead of every partition for "hash IS NULL" (migration 031's
-- sealer scanned the whole log, 400 days of it, every 5 seconds).
--
-- How low moves: each round notes the sequence's last value S and, after it, a new
-- transaction id X (the sealer's own, pg_current_xact_id(); not pg_snapshot_xmax, which
-- is the last completed id plus one). An entry whose seq is at most S drew it before S
-- was read, in a transaction that already had its id, below X; once the
-- horizon (pg_snapshot_xmin) reaches X every such transaction has ended, so a round that
-- seals everything below its horizon seals every entry up to S, and low becomes S.
-- That needs each nextval to be visible to a read of last_value when it returns, so the
-- sequence must not cache values per session (CACHE 1, the default, said again here).
--
-- Expand-only: an index, a table and a sequence option; v0.1.0 knows none of them.
ALTER SEQUENCE oncebox_audit_seq CACHE 1;

CREATE INDEX IF NOT EXISTS oncebox_audit_seq_brin ON oncebox_audit USING brin (seq);

CREATE TABLE IF NOT EXISTS oncebox_audit_mark (
    one       boolean PRIMARY KEY DEFAULT true CHECK (one),
    -- low: every entry with seq <= low is sealed.
    low       bigint  NOT NULL DEFAULT 0,
    -- An earlier round's note, not passed yet: the sequence's value and a transaction
    -- id assigned after it was read.
    mark_seq  bigint,
    mark_xmax xid8
);
