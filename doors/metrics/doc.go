// Package metrics exposes oncebox's Prometheus metrics from a registry of its own (no
// global registry): enqueue outcomes and the replay hit rate, dispatch latency and
// outcome classes by vendor, ops by status, reconcile decisions and duplicates found,
// key-expiry collisions, and River queue depth.
//
// Metrics implements outbox.Observer and reconcile.Observer; the gauges that reflect the
// database (ops by status, queue depth) are read from Postgres at scrape time.
package metrics
