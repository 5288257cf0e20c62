// Package audit reads, seals and streams oncebox's audit log (migration 031, docs/audit.md): the
// append-only entries that triggers write in the transaction of every change to an op or
// a setting, which the TTL purge never deletes.
//
// The Sealer chains each tenant's entries (hash = sha256(prev_hash || canonical entry))
// in (tx, seq) order, sealing only entries whose transaction is older than every
// transaction still in progress, and writes checkpoints signed with the operator's
// ed25519 key. Verify recomputes a tenant's chain and its checkpoints and names the first
// entry that does not match; Export streams a tenant's entries of a time window.
//
// The Streamer sends the sealed entries to a SIEM as OpenTelemetry log records
// (LogRecord), each tenant's in chain order, at least once: its cursor per tenant
// (migration 032) moves only after the exporter accepted a batch, so a receiver dedupes
// by tenant and seq.
package audit
