// Command oncebox-chaos proves exactly-once under crashes: it runs several
// `oncebox serve` processes against one Postgres and the stateful fake vendors
// (with fault injection), enqueues thousands of ops through the HTTP API —
// duplicates, concurrent copies of a key and conflicting payloads included —
// while it SIGKILLs serve processes, pauses one (SIGSTOP past the job timeout and
// --rescue-after, then SIGCONT), restarts Postgres cleanly and later crashes it
// (SIGKILL of the postmaster, on a cluster with fsync, synchronous_commit and
// full_page_writes on), and partitions one serve process, run in a network
// namespace of its own with a veth pair per path: its link to the fake vendors
// down past the job timeout, later its link to Postgres down past the job timeout
// and --rescue-after, each brought back (root and ip netns needed: skipped with a
// log line without them, a failed run when CI is set), then waits until
// every op is settled and checks the fakes' own records: exactly one side
// effect per succeeded op (the one its vendor_ref names, of its amount), none
// per failed op, no failed op but a planned decline, no op in needs_review but
// the blind target's, no key answered 202 twice, no object without an op, and
// no conflicting payload executed. It records every API call it makes and
// checks each key's history for linearizability (porcupine) against a
// sequential model of an op, printing the smallest history no sequential order
// explains. With --webhook-native-keys=false the serve processes run webhooks
// in oncebox's default mode, and a share of them go to a receiver that does
// not deduplicate keys, with every serve process SIGKILLed after some of its
// deliveries.
//
// An eighth of the ops go through the serve processes' tool catalog to fake MCP
// upstreams. Half go to devkit/fakemcp over streamable HTTP, served by the harness so
// that its mails outlive the kills: its send_mail, reconciled through its lookup tool
// find_mail, drops the connection after acting, hangs past the call timeout or answers
// isError at random, and every serve process is SIGKILLed once after it acted and
// twice after it answered, before the outcome was committed. With native keys (the
// default) it deduplicates on the _meta idempotency key and is declared native_keys;
// with --webhook-native-keys=false it is not. The other half go to the same fake over
// stdio (devkit/fakemcp/cmd/fakemcp), a child of each serve process, the children
// sharing one state file; every few seconds the next send_mail records its mail and the
// child exits before answering. The verdict counts each op's mails in the fakes' own
// records: one per succeeded op (the one its result names), none per failed op, and no
// failed op but one the upstream records refusing.
//
// The HTTP upstream is also hostile: it offers wipe_mailbox, destructive and gated
// (approval: {mode: always} in the catalog), which 3% of the ops call; the harness
// approves half of them through the approval API with an approver token, rejects a
// quarter and leaves a quarter waiting. Two fifths into the chaos the upstream lists
// wipe_mailbox as read-only (notifications/tools/list_changed), and all along it answers
// every third wipe_mailbox, every twelfth send_mail and every fourth lookup with
// truncated JSON while other calls are in flight on the session. The verdict wants no wipe but one per op the
// harness approved, every gated call answered awaiting_approval, a refusal to loosen
// the tool in the serve logs, and no op taken down by another call's garbage (in
// needs_review with none of its calls garbled, or recorded as answered with garbage
// the upstream sent another call), and no session of the upstream ended on garbage
// let through to the SDK's client. Its garbage goes out under odd Content-Type
// spellings (Application/JSON, parameters, spacing, SSE), and every 3 s the harness has
// a serve process read count_mail while the upstream answers it with 300 MB, streamed,
// under such a spelling: every such answer must be cut at max_result_bytes, and no
// serve process's peak resident memory (VmHWM) may pass 256 MiB (serve_peak_rss_mib).
// A rolling upgrade runs without it.
//
// 3% of the keys call the catalog's composite tool chaos.checkout (docs/steps.md): a
// charge, its receipt, then a webhook, each step an op under ~step/<parent op id>/<step>
// held to the one-side-effect-per-op rule; 30% of them send the webhook where the
// receiver refuses it for good, so the charge is refunded. The verdict also wants every
// composite op terminal after the calm, and its end as planned: a planned failure never
// succeeds and, failed with its charge made, has its refund; no other op fails or undoes
// its charge (composite.go). A rolling upgrade runs without it.
//
// Where features meet (crm.go, issue 42): a fake CRM target offers crm.note and crm.wipe
// (unsafe) with a 3 s TTL, purged every 2 s, and crm.note_then_wipe (steps: note, then
// wipe), whose wipe the harness approves past the note's TTL; every note and wipe must be
// made once, each composite op succeed with one of each (or wait in needs_review). Tenant
// B's approver resolves B's crm.open_account ops in needs_review with A's account, a
// wrong one and the right one, and B's agent then closes that account (owned); no
// account may be closed by another tenant's op than the one whose op opened it
// (CROSS_TENANT). With --http2 (the default) the fakes but the MCP upstream are served
// over TLS offering HTTP/2, and a late-delivery fault holds a share of the POSTs to the
// vendors without keys until the client gives up, then delivers them late over a
// connection still open (an HTTP/2 stream reset) and drops them when the client closed it
// (HTTP/1.1), h2.go.
//
// Run it from the module root (`make chaos` does):
//
//	go run ./cmd/oncebox-chaos [--ops 2000] [--workers 2] [--seed N]
//	    [--duration-cap 6m] [--enqueue-for 40s] [--database-url URL] [--keep]
//	    [--webhook-native-keys=false] [--partitions=false] [--long-pg-cut 105s] [--upgrade-from COMMIT]
//	    [--failover sync|async] [--http2=false]
//
// With --failover (make chaos-failover) the private primary has a streaming standby,
// synchronous or not, and the serve processes a multi-host DATABASE_URL; two thirds in,
// the standby is held 2 s behind, the primary SIGKILLed and the standby promoted. After
// the run the old primary, started alone, is compared with the standby at the fork
// (failover.go): with sync no lost op row may have been answered and the verdict is the
// usual one; with async the findings about the ops the loss touched are printed as
// FAILOVER_LOSS and counted, not failed, and keys_with_two_effects counts the keys a
// vendor acted on twice.
//
// Its ops go to two tenants, each on its own Stripe Connect account of the fake Stripe
// (tenants.go; one tenant on the platform in a rolling upgrade), and the verdict flags an
// object on an account other than its op's tenant's (WRONG_ACCOUNT).
//
// The audit log (docs/audit.md, audit.go): once every op settled, and while the serve
// processes still run, the harness waits (60 s at most) until their sealer sealed every
// entry of its tenants, then hands audit.CheckOps every op it knows of (the stored ones,
// and those the TTL purge took that an answer named or a vendor's object is tagged with,
// such as the CRM's notes): one call entry each, first, no
// status change recorded twice, the last status the op's, each tenant's chain intact.
// Each problem, and an entry left unsealed, is an AUDIT finding. A rolling upgrade judges
// only the ops created after this tree's migrate (the triggers' migration) returned; an
// asynchronous failover only the ops the new primary stores.
//
// It prints one line of figures,
//
//	ops=… kills=… pg_restarts=… pg_crashes=… pauses=… partitions=… takeovers=… faults=… tenants=2 accounts=2 wrong_account=0 duplicates=0 lost=0 audit_ops=… audit_purged=… audit_skipped=0 audit_entries=… audit_unsealed=0 audit_problems=0 needs_review=… wall=… (more figures)
//
// and exits 1 on any duplicate, loss or other broken promise (2 when it could
// not run), printing every finding with the op's attempts, events and vendor
// objects and keeping the serve processes' logs. Every process it started is
// stopped on the way out, Ctrl-C included.
package main
