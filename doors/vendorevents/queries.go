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

// sameAccount is the condition that the op row op was sent the way the event came
// (the SQL expression account): for Stripe, from the Connect account the op was
// accepted under ("" the platform's), or, for an op sent with its tenant's own key,
// through that tenant's own endpoint ("tenant:<id>", TenantAccount), never the
// platform's: an event from elsewhere says nothing about the op. SendGrid events carry
// no account: they are bound by the message id (confirmedByRef).
func sameAccount(op, account string) string {
	return `(CASE WHEN ` + op + `.vendor <> 'stripe' THEN ''
		WHEN ` + op + `.vendor_account LIKE 'key:%' THEN 'tenant:' || ` + op + `.tenant_id
		ELSE coalesce(` + op + `.vendor_account, '') END) = coalesce(` + account + `, '')`
}

// refMatches is the condition that the event names the object the op made, as far as
// the op knows it: an op whose vendor_ref is known takes only the events of that
// object; before then, events are the op's but unconfirmed (Event.Unconfirmed).
func refMatches(op, event string) string {
	return `(` + op + `.vendor_ref IS NULL OR ` + op + `.vendor_ref = ` + event + `.object_id)`
}

// eventColumns are the columns scanEvent reads.
const eventColumns = `e.vendor, e.event_id, e.event_type, e.op_tag, e.object_type, e.object_id, e.status, coalesce(e.amount, 0),
	coalesce(e.currency, ''), e.object_created, e.occurred_at, e.summary, e.received_at, e.orphan, coalesce(e.account, ''),
	o.vendor_ref IS NULL`

// sqlEventsForOp lists the events tagged with an op that came the way it was sent and
// name the object it made (once known), oldest first.
var sqlEventsForOp = `
SELECT ` + eventColumns + `
FROM oncebox_vendor_event e JOIN oncebox_op o ON o.id::text = e.op_tag
WHERE e.op_tag = $1 AND e.vendor = $2 AND ` + sameAccount("o", "e.account") + ` AND ` + refMatches("o", "e") + `
ORDER BY e.occurred_at, e.id`

// sqlEventsForOps lists the events tagged with any of the ops $1 that came the way
// their op was sent and name the object it made (once known), oldest first.
var sqlEventsForOps = `
SELECT ` + eventColumns + `
FROM oncebox_vendor_event e JOIN oncebox_op o ON o.id::text = e.op_tag
WHERE e.op_tag = ANY($1::text[]) AND e.vendor = o.vendor AND ` + sameAccount("o", "e.account") + ` AND ` + refMatches("o", "e") + `
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
