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

-- A BRIN index built on an empty table holds a summary of its first range at once, which
-- every insert into that range then widens (71 bytes of WAL per entry in BenchmarkWAL);
-- a range with no summary costs nothing on insert. So each partition's first range is
-- left unsummarized (VACUUM summarizes a range once it is full), here and by
-- oncebox_audit_partition for the partitions it creates.
CREATE OR REPLACE FUNCTION oncebox_audit_unsummarize(part regclass) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    idx regclass;
BEGIN
    FOR idx IN SELECT i.indexrelid::regclass FROM pg_index i JOIN pg_inherits h ON h.inhrelid = i.indexrelid
        WHERE h.inhparent = 'oncebox_audit_seq_brin'::regclass AND i.indrelid = part
    LOOP
        PERFORM brin_desummarize_range(idx, 0);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION oncebox_audit_partition(t timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    m date := date_trunc('month', t AT TIME ZONE 'UTC')::date;
    name text := 'oncebox_audit_' || to_char(m, 'YYYYMM');
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF oncebox_audit FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 80)',
        name, (m::timestamp AT TIME ZONE 'UTC'), ((m + interval '1 month')::timestamp AT TIME ZONE 'UTC'));
    PERFORM oncebox_audit_unsummarize(name::regclass);
END
$$;

SELECT oncebox_audit_unsummarize(h.inhrelid::regclass) FROM pg_inherits h WHERE h.inhparent = 'oncebox_audit'::regclass;
