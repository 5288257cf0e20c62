package outbox

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/notify"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/purge"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/vendorapi"
)

// Config configures an Outbox.
type Config struct {
	// Pool is the Postgres pool holding oncebox's and River's tables. Required.
	Pool *pgxpool.Pool
	// Tools is the registry of accepted tools. Required.
	Tools *Registry
	// Vendors are the vendor adapters ops are dispatched to. With none the Outbox can
	// enqueue but works no jobs (an insert-only client, for callers embedding the library).
	Vendors []vendorapi.Vendor
	// Queues configures each vendor's queue by vendor name. Defaults to
	// dispatch.QueueConfig defaults for every vendor.
	Queues map[string]dispatch.QueueConfig
	// Work says whether this process works jobs. Defaults to true when Vendors is set.
	Work *bool
	// BatchedCompletion records a vendor's answer in one autocommitted statement and
	// lets River's batched completer finish the job afterwards, instead of completing
	// the job with JobCompleteTx in the result's transaction. It is as safe (a job that
	// runs again after a crash finds its op settled and completes without calling the
	// vendor) and measurably faster (see docs/performance.md), at the price of a job
	// that may show as running a moment after its op settled: a release for resend in
	// that moment waits for it (see dispatch.Dispatcher.InsertReleaseJobTx). Defaults to true.
	BatchedCompletion *bool
	// GroupCommit commits the enqueues that arrive together (Enqueue, EnqueuePrepared)
	// in one transaction; see GroupCommit. Off by default (serve turns it on).
	GroupCommit GroupCommit
	// ClaimCommit commits every claim (the op as dispatching with a fresh token and its
	// attempt row) before the vendor is called, as oncebox did before its clean runs.
	// Off, a clean run (no earlier run of the op may have called the vendor without its
	// answer being recorded) calls with no claim commit: River's fetch, which committed
	// the job running with its new attempt number, is the durable marker, and the answer
	// is recorded fenced by the job's (id, attempt) (docs/reliability.md, "Fencing"); a run that is
	// not clean still takes the locking path. Defaults to false.
	ClaimCommit bool
	// MixedVersions, when set, reports whether a process of an older release may be
	// live on the database (internal/fleet reads it from oncebox_process and the jobs
	// running); while it reports true, every claim is committed as with ClaimCommit, the
	// path every release understands. serve sets it; nil means never.
	MixedVersions func() bool
	// NoDispatch keeps a working process from working the vendors' dispatch queues, so
	// it runs only the periodic jobs. Defaults to false.
	NoDispatch bool
	// MaxAttempts is how many retryable failures an op may see before it goes to
	// needs_review. Defaults to dispatch.DefaultMaxAttempts (10).
	MaxAttempts int
	// RescueStuckJobsAfter is how long a running job may go without finishing before
	// River considers its worker dead and runs it again; the dispatch worker then finds
	// the op in dispatching and resolves it safely. Must exceed every JobTimeout.
	// Defaults to dispatch.DefaultRescueStuckJobsAfter, 2 minutes (River's own default is an hour).
	RescueStuckJobsAfter time.Duration
	// FetchCooldown is River's minimum pause between two fetches of a queue. Defaults
	// to 5 ms (River's default of 100 ms caps a queue at about 1,000 jobs/s).
	FetchCooldown time.Duration
	// FetchPollInterval is how often River polls for jobs when no notification comes.
	// Defaults to 500 ms.
	FetchPollInterval time.Duration
	// RetryBackoff is the delay before the next attempt after a retryable failure
	// without Retry-After. Defaults to dispatch.CappedBackoff(5 * time.Minute): 1 s, 2 s, 4 s, …
	// with jitter, never more than 5 minutes (River's own attempt^4 seconds would take
	// hours to reach MaxAttempts).
	RetryBackoff func(attempt int) time.Duration
	// ExtraWorkers registers more River workers on the same client (the server's vendor
	// event jobs). Optional.
	ExtraWorkers func(*river.Workers) error
	// ExtraQueues adds River queues for ExtraWorkers' jobs. Optional.
	ExtraQueues map[string]river.QueueConfig
	// PeriodicJobs are more River periodic jobs to run (the server's vendor event
	// jobs). Optional.
	PeriodicJobs []*river.PeriodicJob
	// Reconcile configures the reconciler (package reconcile), which settles ops whose
	// outcome is unknown from the vendor's own records (ReconcileOnce), periodically when
	// Reconcile.Periodic is set. Defaults to reconcile.Config's defaults, swept only on
	// demand.
	Reconcile reconcile.Config
	// Purge, when set, runs the TTL purge as a River periodic job in processes that work
	// jobs. Optional.
	Purge *purge.Config
	// SealKey (32 bytes) encrypts the full arguments of tools that have Redact, so only
	// their redacted form is ever stored in clear; the sealed copy is dropped once the op
	// is terminal. A key derived from it also keys those tools' fingerprints (see
	// Fingerprint). Every process of one deployment needs the same key. Without it, such
	// arguments are stored in clear until the op is terminal, then redacted, and their
	// fingerprints are plain SHA-256.
	SealKey []byte
	// Gate decides, once per new op inside the enqueue's transaction, whether it runs,
	// waits for a person, or is refused (package governance: approval rules, budgets,
	// tenant policies). Defaults to ToolRules: an op waits only as its tool's own
	// NeedsApproval says, with no budget and no tenant rule.
	Gate Gate
	// ApprovalExpiry is how long an op waits for a decision before it is rejected with
	// the reason "approval expired". Defaults to DefaultApprovalExpiry (72 hours).
	ApprovalExpiry time.Duration
	// AdmissionReadTimeout bounds each vendor read a new op's admission makes (the
	// vendor's tag of an object the tenant's ops do not name, ObjectArg.Tag; the price of
	// a refund without an amount, Tool.Price). Enqueue and EnqueuePrepared make these
	// reads before their transaction, never inside it; an EnqueueTx makes them inside the
	// caller's transaction, bounded by this limit. A read that times out is a vendor that
	// could not be asked: the call is refused with an *ObjectUnavailableError, or its op
	// waits for a person when it cannot be priced. Defaults to
	// DefaultAdmissionReadTimeout (5 seconds).
	AdmissionReadTimeout time.Duration
	// Notify, when set, POSTs a signed notification whenever an op starts waiting for
	// approval, through a River job inserted with the op. Optional.
	Notify *notify.Config
	// Observer receives counts for metrics. Defaults to one that does nothing.
	Observer Observer
	// Logger receives structured logs. Defaults to discarding them.
	Logger *slog.Logger
	// TracerProvider, when set, traces enqueues, dispatch attempts and every status
	// change (see internal/tracing). Nil: tracing is off, at no cost.
	TracerProvider trace.TracerProvider
	// ClientID names this process to River. Defaults to a generated id that starts with
	// dispatch.LiveClientPrefix. A working process whose id starts with it holds a liveness lock
	// (a session advisory lock on a connection of its own) while it lives, so that the
	// others take its dispatch jobs over as soon as it is gone instead of after
	// RescueStuckJobsAfter (docs/reliability.md, "Recovery"); with another id its jobs wait for River's
	// rescuer.
	ClientID string
}

// Observer is told about events that metrics count. Every method must be quick and safe
// for concurrent use.
type Observer interface {
	// Enqueued is called once per enqueue call with kind "new", "replay", "conflict" or
	// "expiry_collision" (a new op whose key hit a tombstone; "new" is reported too) or
	// "identity_match" (a replay matched by the tool's identity fields although other
	// arguments differ; "replay" is reported too), and the tenant the call came from.
	Enqueued(tenantID int64, tool, kind string)
	// Dispatched is called after each vendor call with the outcome ("succeeded",
	// "retryable", "permanent", "unknown") and how long the call took.
	Dispatched(vendor, outcome string, took time.Duration)
	// Transition is called after an op's status changed and the change was committed.
	Transition(vendor string, from, to protocol.Status)
}

type nopObserver struct{}

func (nopObserver) Enqueued(int64, string, string)                      {}
func (nopObserver) Dispatched(string, string, time.Duration)            {}
func (nopObserver) Transition(string, protocol.Status, protocol.Status) {}

func (c *Config) withDefaults() Config {
	out := *c
	if out.Gate == nil {
		out.Gate = ToolRules{}
	}
	if out.MaxAttempts == 0 {
		out.MaxAttempts = dispatch.DefaultMaxAttempts
	}
	if out.AdmissionReadTimeout <= 0 {
		out.AdmissionReadTimeout = DefaultAdmissionReadTimeout
	}
	if out.ApprovalExpiry == 0 {
		out.ApprovalExpiry = DefaultApprovalExpiry
	}
	if out.RescueStuckJobsAfter == 0 {
		out.RescueStuckJobsAfter = dispatch.DefaultRescueStuckJobsAfter
	}
	if out.FetchCooldown == 0 {
		out.FetchCooldown = 5 * time.Millisecond
	}
	if out.FetchPollInterval == 0 {
		out.FetchPollInterval = 500 * time.Millisecond
	}
	if out.RetryBackoff == nil {
		out.RetryBackoff = dispatch.CappedBackoff(5 * time.Minute)
	}
	if out.Observer == nil {
		out.Observer = nopObserver{}
	}
	if out.ClientID == "" {
		out.ClientID = dispatch.NewClientID()
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	queues := make(map[string]dispatch.QueueConfig, len(out.Vendors))
	for _, v := range out.Vendors {
		q := out.Queues[v.Name()]
		if q.MaxWorkers == 0 {
			q.MaxWorkers = dispatch.DefaultMaxWorkers
		}
		if q.JobTimeout == 0 {
			q.JobTimeout = dispatch.DefaultJobTimeout
		}
		queues[v.Name()] = q
	}
	out.Queues = queues
	if out.BatchedCompletion == nil {
		b := true
		out.BatchedCompletion = &b
	}
	if out.Work == nil {
		w := len(out.Vendors) > 0
		out.Work = &w
	}
	return out
}

// riverMaxAttempts is the River job's own attempt limit: MaxAttempts and a margin, so
// that the op's own count (which sends it to review or to the reconciler) ends the job
// first; River's limit only stops a job whose runs end without recording an attempt.
func (c *Config) riverMaxAttempts() int { return c.MaxAttempts + 5 }

func (c *Config) validate() error {
	if c.Pool == nil {
		return errors.New("outbox: Config.Pool is required")
	}
	if c.Tools == nil {
		return errors.New("outbox: Config.Tools is required (build one with NewRegistry)")
	}
	if g := c.GroupCommit; g.MaxOps < 0 || g.MaxOps > 1000 || g.Committers < 0 || g.Committers > 100 {
		return fmt.Errorf("outbox: GroupCommit {MaxOps: %d, Committers: %d} out of range; use MaxOps 0 to 1000 and Committers 0 to 100", g.MaxOps, g.Committers)
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 1000 {
		return fmt.Errorf("outbox: MaxAttempts %d out of range; use 1 to 1000", c.MaxAttempts)
	}
	for name, q := range c.Queues {
		if q.MaxWorkers < 1 || q.MaxWorkers > 10000 {
			return fmt.Errorf("outbox: queue %q: MaxWorkers %d out of range; use 1 to 10000", name, q.MaxWorkers)
		}
		if q.JobTimeout >= c.RescueStuckJobsAfter {
			return fmt.Errorf("outbox: queue %q: JobTimeout %s must be shorter than RescueStuckJobsAfter %s, or running dispatches would be rescued", name, q.JobTimeout, c.RescueStuckJobsAfter)
		}
	}
	seen := map[string]bool{}
	for _, v := range c.Vendors {
		if seen[v.Name()] {
			return fmt.Errorf("outbox: vendor %q configured twice", v.Name())
		}
		seen[v.Name()] = true
	}
	return c.validateTTLs()
}

// validateTTLs refuses a tool whose ops would be purged while its vendor still
// remembers their keys: a retry after the purge becomes a new op, under a new vendor
// key, which the vendor would no longer recognise as the one it has already carried out.
func (c *Config) validateTTLs() error {
	windows := map[string]time.Duration{}
	for _, v := range c.Vendors {
		if idem := v.Idempotency(); idem.Native {
			windows[v.Name()] = idem.Window
		}
	}
	for _, name := range c.Tools.Names() {
		t, _ := c.Tools.Lookup(name)
		if w, ok := windows[t.Vendor]; ok && t.TTL < w {
			return &TTLError{Tool: name, TTL: t.TTL, Vendor: t.Vendor, Window: w}
		}
	}
	return nil
}

// TTLError says that a tool keeps its ops for less than its vendor's idempotency key
// window.
type TTLError struct {
	Tool   string
	TTL    time.Duration
	Vendor string
	Window time.Duration
}

// Error implements error.
func (e *TTLError) Error() string {
	return fmt.Sprintf("outbox: tool %q keeps its ops %s, less than vendor %q's idempotency key window of %s: "+
		"a retry after the purge would be a new op that the vendor no longer deduplicates; keep them at least %s",
		e.Tool, e.TTL, e.Vendor, e.Window, e.Window)
}
