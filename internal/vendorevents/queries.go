package vendorevents

// All of the package's SQL lives here. Events are read by their op tag (the id of the
// op, as text) and vendor; an event whose tag names no op is an orphan.

// sqlInsertEvent stores one event unless its (vendor, event_id) is stored already, and
// says whether its tag named no op ($15: the tag as a uuid, NULL when it is not one).
var sqlInsertEvent = `
INSERT INTO oncebox_vendor_event (vendor, event_id, event_type, op_tag, object_type, object_id, status,
	amount, currency, object_created, occurred_at, summary, orphan, account)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, nullif($9, ''), $10, $11, $12,
	NOT EXISTS (SELECT 1 FROM oncebox_op o WHERE o.id = $13::uuid AND ` + sameAccount("o", "$14") + `), nullif($14, '')
ON CONFLICT (vendor, event_id) DO NOTHING
RETURNING orphan`

// sameAccount is the condition that the op row op was accepted under the Connect
// account the SQL expression account names (” the platform's): an event from another
// account says nothing about the op. An op sent with its tenant's own key takes the
// events without an account (its own account's endpoint).
func sameAccount(op, account string) string {
	return `(CASE WHEN ` + op + `.vendor_account LIKE 'key:%' THEN '' ELSE coalesce(` + op + `.vendor_account, '') END) = coalesce(` + account + `, '')`
}

// eventColumns are the columns scanEvent reads.
const eventColumns = `e.vendor, e.event_id, e.event_type, e.op_tag, e.object_type, e.object_id, e.status, coalesce(e.amount, 0),
	coalesce(e.currency, ''), e.object_created, e.occurred_at, e.summary, e.received_at, e.orphan, coalesce(e.account, '')`

// sqlEventsForOp lists the events tagged with an op, from the account it was accepted
// under, oldest first.
var sqlEventsForOp = `
SELECT ` + eventColumns + `
FROM oncebox_vendor_event e
WHERE e.op_tag = $1 AND e.vendor = $2
	AND NOT EXISTS (SELECT 1 FROM oncebox_op o WHERE o.id::text = e.op_tag AND NOT ` + sameAccount("o", "e.account") + `)
ORDER BY e.occurred_at, e.id`

// sqlEventsForOps lists the events tagged with any of the ops $1, from the accounts
// they were accepted under, oldest first.
var sqlEventsForOps = `
SELECT ` + eventColumns + `
FROM oncebox_vendor_event e
WHERE e.op_tag = ANY($1::text[])
	AND NOT EXISTS (SELECT 1 FROM oncebox_op o WHERE o.id::text = e.op_tag AND NOT ` + sameAccount("o", "e.account") + `)
ORDER BY e.occurred_at, e.id`

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
