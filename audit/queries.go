package audit

// All of the audit package's SQL. Entries are read in chain order, (tx, seq), per tenant
// (index oncebox_audit_chain).

const entryColumns = `tenant_id, seq, tx::text::numeric::bigint, at, kind, coalesce(op_id::text, ''), fp, e::text, prev_hash, hash`

// sqlSealLock serializes the sealers of all processes: one seals, the others skip.
const sqlSealLock = `SELECT pg_try_advisory_xact_lock(7310247001)`

// sqlLastSeq is the last seq drawn (0 when none was): every entry with a seq at most
// this one drew it already, in a transaction that had its id.
const sqlLastSeq = `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM oncebox_audit_seq`

// sqlHorizon is the oldest transaction still in progress (every entry of an older
// transaction is committed or rolled back, and visible to the statements that follow)
// and the sealer's own transaction id, assigned here: larger than every id assigned
// before. (A snapshot's xmax is not that: it is the last completed id plus one, and
// younger transactions may be in progress.)
const sqlHorizon = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::numeric::bigint,
	pg_current_xact_id()::text::numeric::bigint`

// sqlMark reads the low-water mark (no row: nothing sealed yet, low 0).
const sqlMark = `SELECT low, mark_seq, mark_xmax::text::numeric::bigint FROM oncebox_audit_mark`

// sqlSetMark writes the low-water mark and the note of the round.
const sqlSetMark = `
INSERT INTO oncebox_audit_mark (one, low, mark_seq, mark_xmax) VALUES (true, $1, $2, $3::text::xid8)
ON CONFLICT (one) DO UPDATE SET low = EXCLUDED.low, mark_seq = EXCLUDED.mark_seq, mark_xmax = EXCLUDED.mark_xmax`

// sqlTenants lists the tenants that have entries past their sealed head: unsealed
// entries above the low-water mark $1 (index oncebox_audit_seq_brin).
const sqlTenants = `SELECT DISTINCT a.tenant_id FROM oncebox_audit a WHERE a.seq > $1 AND a.hash IS NULL`

const sqlHead = `SELECT tx::text::numeric::bigint, seq, hash, entries, sealed_at FROM oncebox_audit_head WHERE tenant_id = $1`

// sqlUnsealed reads up to $4 entries of tenant $1 after the head ($2 tx, $3 seq) whose
// transaction is older than the horizon ($5).
const sqlUnsealed = `SELECT ` + entryColumns + ` FROM oncebox_audit
WHERE tenant_id = $1 AND (tx, seq) > ($2::text::xid8, $3) AND tx < $5::text::xid8
ORDER BY tx, seq LIMIT $4`

const sqlSeal = `
UPDATE oncebox_audit a SET prev_hash = s.prev, hash = s.hash
FROM unnest($2::bigint[], $3::bytea[], $4::bytea[]) AS s(seq, prev, hash)
WHERE a.tenant_id = $1 AND a.seq = s.seq`

const sqlSetHead = `
INSERT INTO oncebox_audit_head (tenant_id, tx, seq, hash, entries, sealed_at)
VALUES ($1, $2::text::xid8, $3, $4, $5, now())
ON CONFLICT (tenant_id) DO UPDATE SET tx = EXCLUDED.tx, seq = EXCLUDED.seq, hash = EXCLUDED.hash,
	entries = EXCLUDED.entries, sealed_at = EXCLUDED.sealed_at`

// sqlLastCheckpoint is when tenant $1's last checkpoint was written (NULL: none).
const sqlLastCheckpoint = `SELECT max(at) FROM oncebox_audit_checkpoint WHERE tenant_id = $1`

const sqlCheckpoint = `
INSERT INTO oncebox_audit_checkpoint (tenant_id, seq, tx, entries, head_hash, public_key, signature)
VALUES ($1, $2, $3::text::xid8, $4, $5, $6, $7) ON CONFLICT DO NOTHING`

const sqlCheckpoints = `SELECT seq, tx::text::numeric::bigint, entries, head_hash, at, public_key, signature
FROM oncebox_audit_checkpoint WHERE tenant_id = $1 ORDER BY entries`

// sqlChain reads all of tenant $1's entries in chain order.
const sqlChain = `SELECT ` + entryColumns + ` FROM oncebox_audit WHERE tenant_id = $1 ORDER BY tx, seq`

// sqlExport reads tenant $1's entries from $2 until $3, in chain order, keeping those of
// ops that match the filters ($4 tool, $5 person, $6 outcome, $7 and $8 the least and
// the most amount; empty or NULL: any) and, when no filter is set, the entries of no op
// (settings) too. An op matches by its call entry in the window (tool, person who asked,
// amount), or by an event of a person ($5 at the end of its actor: "acme token 7
// (approver) alice@acme.example"), and by its last status in the window (the call's
// held status, else pending, when it has none). At most $9 entries (0: all).
const sqlExport = `
WITH w AS (
	SELECT * FROM oncebox_audit
	WHERE tenant_id = $1 AND at >= $2 AND at < $3
), ops AS (
	SELECT op_id FROM w WHERE op_id IS NOT NULL GROUP BY op_id
	HAVING bool_or(kind = 'call'
			AND ($4 = '' OR e ->> 'tool' = $4)
			AND ($7::bigint IS NULL OR (jsonb_typeof(e -> 'amount') = 'number' AND (e ->> 'amount')::numeric >= $7))
			AND ($8::bigint IS NULL OR (jsonb_typeof(e -> 'amount') = 'number' AND (e ->> 'amount')::numeric <= $8)))
		AND ($5 = '' OR bool_or((kind = 'call' AND e ->> 'person' = $5)
			OR (kind = 'event' AND (e ->> 'actor' = $5 OR right(e ->> 'actor', length($5) + 1) = ' ' || $5))))
		AND ($6 = '' OR coalesce((array_agg(e ->> 'to' ORDER BY tx DESC, seq DESC) FILTER (WHERE kind = 'status'))[1],
			(array_agg(coalesce(e ->> 'held', 'pending')) FILTER (WHERE kind = 'call'))[1]) = $6)
)
SELECT ` + entryColumns + ` FROM w
WHERE CASE WHEN $4 = '' AND $5 = '' AND $6 = '' AND $7::bigint IS NULL AND $8::bigint IS NULL THEN true
	ELSE op_id IN (SELECT op_id FROM ops) END
ORDER BY tx, seq LIMIT CASE WHEN $9 > 0 THEN $9 END`

// sqlPartitionsAhead creates this month's partition and the next two.
const sqlPartitionsAhead = `SELECT oncebox_audit_partition(now() + make_interval(months => i)) FROM generate_series(0, 2) AS i`

// sqlExpiredPartitions lists the monthly partitions whose whole month ended before $1.
const sqlExpiredPartitions = `
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'oncebox_audit'::regclass AND c.relname ~ '^oncebox_audit_[0-9]{6}$'
	AND (to_date(substr(c.relname, 15), 'YYYYMM') + interval '1 month') <= $1::timestamptz AT TIME ZONE 'UTC'`

// sqlStreamLock serializes the streamers of all processes sharing a schema: one streams,
// the others skip. A session lock (sqlStreamUnlock releases it): the streamer holds no
// transaction open while a receiver answers.
const sqlStreamLock = `SELECT pg_try_advisory_lock(hashtextextended('oncebox_audit_stream ' || current_schema(), 0))`

const sqlStreamUnlock = `SELECT pg_advisory_unlock(hashtextextended('oncebox_audit_stream ' || current_schema(), 0))`

// sqlStreamTenants lists the tenants whose sealed head is past their stream cursor, with
// their name (empty for the installation, 0, or a tenant since deleted) and the cursor.
const sqlStreamTenants = `
SELECT h.tenant_id, coalesce(t.name, ''), coalesce(s.tx, '0'::xid8)::text::numeric::bigint, coalesce(s.seq, 0)
FROM oncebox_audit_head h
LEFT JOIN oncebox_audit_stream s ON s.tenant_id = h.tenant_id
LEFT JOIN oncebox_tenant t ON t.id = h.tenant_id
WHERE s.tenant_id IS NULL OR (h.tx, h.seq) > (s.tx, s.seq)
ORDER BY h.tenant_id`

// sqlSealedAfter reads up to $4 sealed entries of tenant $1 after the cursor ($2 tx, $3
// seq), in chain order.
const sqlSealedAfter = `SELECT ` + entryColumns + ` FROM oncebox_audit
WHERE tenant_id = $1 AND (tx, seq) > ($2::text::xid8, $3) AND hash IS NOT NULL
ORDER BY tx, seq LIMIT $4`

// sqlAdvanceStream moves tenant $1's cursor to the entry ($2 tx, $3 seq) after $4 more
// entries were exported; never backwards.
const sqlAdvanceStream = `
INSERT INTO oncebox_audit_stream (tenant_id, tx, seq, entries, exported_at)
VALUES ($1, $2::text::xid8, $3, $4, now())
ON CONFLICT (tenant_id) DO UPDATE SET tx = EXCLUDED.tx, seq = EXCLUDED.seq,
	entries = oncebox_audit_stream.entries + EXCLUDED.entries, exported_at = EXCLUDED.exported_at
WHERE (oncebox_audit_stream.tx, oncebox_audit_stream.seq) < (EXCLUDED.tx, EXCLUDED.seq)`
