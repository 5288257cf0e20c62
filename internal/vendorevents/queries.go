package vendorevents

// All of the package's SQL lives here. Events are read by their op tag (the id of the
// op, as text) and vendor; an event whose tag names no op is an orphan.

// sqlInsertEvent stores one event unless its (vendor, event_id) is stored already, and
// says whether its tag named no op ($15: the tag as a uuid, NULL when it is not one).
const sqlInsertEvent = `
INSERT INTO oncebox_vendor_event (vendor, event_id, event_type, op_tag, object_type, object_id, status,
	amount, currency, object_created, occurred_at, summary, orphan)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, nullif($9, ''), $10, $11, $12,
	NOT EXISTS (SELECT 1 FROM oncebox_op WHERE id = $13::uuid)
ON CONFLICT (vendor, event_id) DO NOTHING
RETURNING orphan`

// sqlEventsForOp lists the events tagged with an op, oldest first.
const sqlEventsForOp = `
SELECT vendor, event_id, event_type, op_tag, object_type, object_id, status, coalesce(amount, 0),
	coalesce(currency, ''), object_created, occurred_at, summary, received_at, orphan
FROM oncebox_vendor_event
WHERE op_tag = $1 AND vendor = $2
ORDER BY occurred_at, id`

// sqlEventsForOps lists the events tagged with any of the ops $1, oldest first.
const sqlEventsForOps = `
SELECT vendor, event_id, event_type, op_tag, object_type, object_id, status, coalesce(amount, 0),
	coalesce(currency, ''), object_created, occurred_at, summary, received_at, orphan
FROM oncebox_vendor_event
WHERE op_tag = ANY($1::text[])
ORDER BY occurred_at, id`

// sqlOrphanCounts counts, per vendor, the events received in [$1, $2) whose tag names
// no op now (their op never existed, or was purged).
const sqlOrphanCounts = `
SELECT e.vendor, count(*)
FROM oncebox_vendor_event e
WHERE e.received_at >= $1 AND e.received_at < $2
	AND NOT EXISTS (SELECT 1 FROM oncebox_op o WHERE o.id::text = e.op_tag)
GROUP BY e.vendor`

// sqlPurge deletes a batch of events received before $1.
const sqlPurge = `
DELETE FROM oncebox_vendor_event WHERE id IN (
	SELECT id FROM oncebox_vendor_event WHERE received_at < $1 ORDER BY received_at LIMIT $2)`
