// Package purge is the TTL purge of settled ops. A round of it (Purger.Purge) deletes the
// terminal ops whose TTL ran out, in batches, leaving a tombstone with each op's key and
// fingerprint, so that a reuse of the key is counted as a key-expiry collision; then it
// deletes the tombstones past their own TTL and the closed key windows. Ops that are not
// terminal are never purged: the op state machine (internal/opstate) guards the delete.
//
// The Outbox owns every job that moves an op, the purge included: outbox.New builds it
// with New, handing it its Config (outbox.Config.Purge) and a Deps struct with what it
// uses of the Outbox (the pool, the op state machine, the expiry of approvals, the
// logger). With outbox.Config.Purge set, the Outbox runs it every Config.Interval as a
// River periodic job (PurgeArgs, kind "oncebox.purge") on MaintenanceQueue, which first
// rejects the ops whose wait for approval ran out and deletes past budget windows;
// outbox.Outbox.Purge runs one purge on demand. The package never imports outbox.
package purge
