package audit

// All of the audit package's SQL. Entries are read in chain order, (tx, seq), per tenant
// (index oncebox_audit_chain).

const entryColumns = `tenant_id, seq, tx::text::numeric::bigint, at, kind, coalesce(op_id::text, ''), fp, e::text, prev_hash, hash`

// sqlSealLock serializes the sealers of all processes: one seals, the others skip.
const sqlSealLock = `SELECT pg_try_advisory_xact_lock(7310247001)`

// sqlHorizon is the oldest transaction still in progress: every entry of an older
// transaction is committed (or rolled back) and visible to the statements that follow.
const sqlHorizon = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::numeric::bigint`

// sqlTenants lists the tenants that have entries past their sealed head.
const sqlTenants = `SELECT DISTINCT a.tenant_id FROM oncebox_audit a WHERE a.hash IS NULL`

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

// sqlExport reads tenant $1's entries from $2 until $3, in chain order.
const sqlExport = `SELECT ` + entryColumns + ` FROM oncebox_audit
WHERE tenant_id = $1 AND at >= $2 AND at < $3 ORDER BY tx, seq`

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
