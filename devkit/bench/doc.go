// Package bench measures oncebox against baselines measured in the same run against the
// same Postgres, so that the ratios mean something on any machine.
//
// The scenarios:
//
//   - enqueue: an op and its River job in one transaction, through the Go API
//     (Outbox.Enqueue) and through HTTP (POST /v1/ops on a real server with a real
//     token), against River's InsertTx of one trivial job per transaction into the same
//     queue setup, and against River's unique insert (UniqueOpts{ByArgs: true}, what a
//     user reaches for to deduplicate; target ≥ 0.8×), at 1, 8 and 32 concurrent callers;
//   - replay: the same key and payload again, against a fresh enqueue (target ≥ 2×);
//   - end to end: N ops enqueued up front and dispatched to a zero-latency fake
//     webhook receiver over loopback HTTP, against River working N no-op jobs with the
//     same fetch settings and worker count, against the floor (Floor: the bare
//     two-commit dispatch written with pgx alone; target ≥ 0.6×) and against the peer
//     (Peer: a River worker doing the same two commits by hand, with JobCompleteTx;
//     target ≥ 1.5×);
//   - vendor latency: the same with 50 ms per vendor call at 50, 100, 200 and 400
//     workers (more while it keeps scaling), against the ideal workers / 50 ms (target:
//     ≥ 0.8× at 100 workers, and throughput never falls as workers are added);
//   - sweeper: ReconcileOnce over a table of ops of which 1% are unknown, until every
//     unknown op is resolved from the fake receiver's lookup.
//
// Two front ends share this code: `go test -run '^$' -bench . ./bench/` (standard Go
// benchmarks that report "ops/s" and the ratio to their baseline, measured inside the
// same benchmark function) and `oncebox bench`, which calls Run and prints one Markdown
// table. Speed is measured and printed, never asserted.
//
// Every scenario runs in a schema of its own (NewSchema), so a run never touches other
// data and leaves nothing behind.
package bench
