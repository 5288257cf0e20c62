// Package dispatch sends ops to their vendors: the River worker of Args (job kind
// "oncebox.dispatch", one queue per vendor, QueueName), how a run claims its op
// (planClaim, a claimPlan), what it records of the vendor's answer (recordOf, an
// answerRecord), the process's liveness lock and the takeover of the jobs of gone
// processes, and the release of an op's job for resend (Dispatcher.InsertReleaseJobTx).
//
// The Outbox owns every job that moves an op, dispatch included: outbox.New builds a
// Dispatcher with New, handing it a Config taken from outbox.Config (ClaimCommit,
// MixedVersions, BatchedCompletion, MaxAttempts, RetryBackoff, ClientID) and a Deps
// struct with what it uses of the Outbox (the pool, the op state machine, the vendors,
// their job timeouts, the tools' redaction, the sealer, the tenants' vendor accounts, the
// reconciler's hand-over, the enqueue's job insert, the observer, the logger and the
// tracer). Its worker runs on the Outbox's River client from outbox.Outbox.Start to Stop.
//
// A run is clean when no earlier run of the op may have called the vendor without its
// answer being recorded (opstate.CleanRunSQL): it reads the op, calls the vendor and
// records the answer fenced by its job's (id, attempt), with no claim commit (River's
// fetch was the claim). Any other run, and every run with Config.ClaimCommit or while a
// process of an older release may be live, locks the op and claims it: the op is
// committed as dispatching with a fresh attempt token before the vendor is called, and
// the answer recorded where the token still matches. An op that may have been sent
// unheard is resent only inside its vendor key's window, else handed to the reconciler.
//
// The package does not import outbox: what it needs of it comes in Deps, through small
// interfaces (Tools, Accounts, Sealed, Observer) that outbox's types satisfy. The
// defaults of dispatch's configuration (DefaultMaxAttempts, DefaultJobTimeout, ...) are
// stated here once.
package dispatch
