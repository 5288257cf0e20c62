package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/vendorapi"
)

// The defaults of dispatch's configuration, as outbox.Config and QueueConfig take them.
// They are stated here once: the server's configuration, the CLI's flags and the table of
// docs/configuration.md take them from these.
const (
	// DefaultMaxAttempts is outbox.Config.MaxAttempts' default.
	DefaultMaxAttempts = 10
	// DefaultMaxWorkers is QueueConfig.MaxWorkers' default.
	DefaultMaxWorkers = 50
	// DefaultJobTimeout is QueueConfig.JobTimeout's default.
	DefaultJobTimeout = 30 * time.Second
	// DefaultRescueStuckJobsAfter is outbox.Config.RescueStuckJobsAfter's default.
	DefaultRescueStuckJobsAfter = 2 * time.Minute
)

// QueueConfig is the River queue of one vendor. Each vendor gets its own queue, so a
// slow vendor cannot starve another.
type QueueConfig struct {
	// MaxWorkers is how many of the vendor's ops one process dispatches at once.
	// Defaults to DefaultMaxWorkers (50).
	MaxWorkers int
	// JobTimeout bounds one dispatch, vendor call included. Defaults to
	// DefaultJobTimeout (30 seconds).
	JobTimeout time.Duration
}

// QueueName is the River queue that carries a vendor's dispatch jobs.
func QueueName(vendor string) string { return "oncebox_" + vendor }

// CappedBackoff returns a retry delay of 2^(attempt-1) seconds, with up to 20% jitter,
// capped at limit.
func CappedBackoff(limit time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		d := limit
		if attempt < 30 {
			d = min(time.Duration(1<<max(attempt-1, 0))*time.Second, limit)
		}
		return d + time.Duration(rand.Int64N(int64(d)/5+1))
	}
}

// Config is how dispatch runs, taken from outbox.Config with its defaults filled in.
type Config struct {
	// ClientID names this process to River (outbox.Config.ClientID). A working process
	// whose id starts with LiveClientPrefix holds a liveness lock while it lives.
	ClientID string
	// Work says whether this process works jobs; only a working process holds a
	// liveness lock.
	Work bool
	// ClaimCommit commits every claim before the vendor is called
	// (outbox.Config.ClaimCommit).
	ClaimCommit bool
	// MixedVersions, when set, reports whether a process of an older release may be
	// live: every claim is then committed as with ClaimCommit. Nil means never.
	MixedVersions func() bool
	// BatchedCompletion records an answer in one autocommitted statement and leaves
	// the job to River's batched completer (outbox.Config.BatchedCompletion).
	BatchedCompletion bool
	// MaxAttempts is how many retryable failures an op may see before it goes to
	// needs_review (or to the reconciler, when a request may have been carried out).
	// Defaults to DefaultMaxAttempts.
	MaxAttempts int
	// RetryBackoff is the delay before the next attempt after a retryable failure
	// without Retry-After. Defaults to CappedBackoff(5 * time.Minute).
	RetryBackoff func(attempt int) time.Duration
}

// Tools looks a tool up by name, for the redaction of a terminal op's args and result.
// *outbox.Registry satisfies it.
type Tools interface {
	Lookup(name string) (vendorapi.Tool, bool)
}

// Accounts opens the vendor account an op was accepted under. *vendoraccount.Settings
// satisfies it.
type Accounts interface {
	Account(ctx context.Context, tenantID int64, vendor, ref string) (vendorapi.Account, error)
}

// Sealed opens the sealed copy of an op's full arguments, stored when its tool redacts.
type Sealed interface {
	Open(tenantID int64, key string, sealed []byte) ([]byte, error)
}

// Observer is told how each vendor call ended, for metrics; outbox.Observer satisfies it.
type Observer interface {
	// Dispatched is called after each vendor call with the outcome ("succeeded",
	// "retryable", "permanent", "unknown") and how long the call took.
	Dispatched(vendor, outcome string, took time.Duration)
}

// Deps is what dispatch uses of the Outbox that runs it; outbox.New hands it over.
// Every field but Vendors (none: no job can be worked) and Tracer (nil: tracing is off)
// is required.
type Deps struct {
	// Pool holds oncebox's and River's tables.
	Pool *pgxpool.Pool
	// Ops makes every status change of an op.
	Ops *opstate.Machine
	// Vendors are the vendor adapters of this process, by name.
	Vendors map[string]vendorapi.Vendor
	// JobTimeout is the dispatch job timeout of a vendor's queue.
	JobTimeout func(vendor string) time.Duration
	// Tools redacts what a terminal op stores.
	Tools Tools
	// Sealed opens an op's sealed arguments.
	Sealed Sealed
	// Accounts opens the keys of the ops sent with their tenant's own key.
	Accounts Accounts
	// HandOverTx tells the reconciler, in tx, that a run handed it an op
	// (reconcile.Reconciler.HandOverTx).
	HandOverTx func(ctx context.Context, tx pgx.Tx) error
	// InsertJobTx inserts an op's job in tx unless it has a live one (the enqueue's).
	InsertJobTx func(ctx context.Context, tx pgx.Tx, opID, vendor string) error
	// Observer counts the vendor calls.
	Observer Observer
	// Logger receives dispatch's log lines.
	Logger *slog.Logger
	// Tracer traces each attempt and its vendor call; nil when tracing is off.
	Tracer trace.Tracer
}

func (d *Deps) validate() error {
	if d.Pool == nil || d.Ops == nil || d.JobTimeout == nil || d.Tools == nil || d.Sealed == nil || d.Accounts == nil ||
		d.HandOverTx == nil || d.InsertJobTx == nil || d.Observer == nil || d.Logger == nil {
		return errors.New("dispatch: Deps needs Pool, Ops, JobTimeout, Tools, Sealed, Accounts, HandOverTx, InsertJobTx, Observer and Logger")
	}
	return nil
}

// Dispatcher sends ops to their vendors: the River worker of Args, the process's
// liveness lock and takeover, and the release of an op's job for resend. The Outbox owns
// it: its worker runs on the Outbox's River client.
type Dispatcher struct {
	cfg  Config
	deps Deps
	// live holds the process's liveness lock and takes over gone processes' jobs; nil
	// in a process that works no jobs or whose client id does not start with
	// LiveClientPrefix.
	live *liveness
}

// New builds a Dispatcher from cfg, with its defaults filled in, and the Outbox's deps.
func New(cfg Config, deps Deps) (*Dispatcher, error) {
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.RetryBackoff == nil {
		cfg.RetryBackoff = CappedBackoff(5 * time.Minute)
	}
	if cfg.MaxAttempts < 1 {
		return nil, fmt.Errorf("dispatch: Config.MaxAttempts %d must be at least 1", cfg.MaxAttempts)
	}
	if err := deps.validate(); err != nil {
		return nil, err
	}
	if deps.Vendors == nil {
		deps.Vendors = map[string]vendorapi.Vendor{}
	}
	d := &Dispatcher{cfg: cfg, deps: deps}
	if cfg.Work && strings.HasPrefix(cfg.ClientID, LiveClientPrefix) {
		d.live = newLiveness(d, cfg.ClientID)
	}
	return d, nil
}

// Register adds the dispatch worker to workers.
func (d *Dispatcher) Register(workers *river.Workers) error {
	if err := river.AddWorkerSafely(workers, &worker{d: d}); err != nil {
		return fmt.Errorf("dispatch: register worker: %w", err)
	}
	return nil
}

// Start takes the process's liveness lock and runs its takeover loop until Stop, when
// the process holds one (Config.ClientID); it waits until the lock is held, for at most
// 5 seconds or until ctx is done: a job fetched before it is put off for a second (see
// the worker's Work), and at a restart with a backlog that is a whole first fetch of
// every queue.
func (d *Dispatcher) Start(ctx context.Context) {
	if d.live == nil {
		return
	}
	d.live.start()
	d.live.waitHeld(ctx, livenessStartWait)
}

// Stop ends the takeover loop and releases the liveness lock, once the workers are
// stopped.
func (d *Dispatcher) Stop() {
	if d.live != nil {
		d.live.close()
	}
}

// liveOK says whether this process may call a vendor: it holds no liveness lock, or its
// lock was confirmed held a moment ago (see liveness).
func (d *Dispatcher) liveOK() bool { return d.live == nil || d.live.ok() }
