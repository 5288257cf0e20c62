package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/outbox"
)

// The decisions a sweep takes, as recorded in op events (detail "decision") and passed
// to Observer.Decision.
const (
	// DecisionStuck moved an op found in dispatching long past its job timeout, with
	// no job running, to unknown.
	DecisionStuck = "stuck_dispatching"
	// DecisionRejob gave a new dispatch job to a pending op whose job was gone (deleted,
	// or finished while the op went back to pending).
	DecisionRejob = "dispatch_job_missing"
	// DecisionJobDiscarded handed a pending op whose dispatch job River discarded or
	// someone cancelled to a person.
	DecisionJobDiscarded = "dispatch_job_discarded"
	// DecisionSucceeded adopted the one object the vendor holds: the op succeeded.
	DecisionSucceeded = "succeeded"
	// DecisionRefused adopted the one object the vendor holds, which records a refusal
	// (a declined payment): the op failed.
	DecisionRefused = "refused_at_vendor"
	// DecisionResend found no object after the lookup lag: the op goes back to pending
	// with the same vendor key.
	DecisionResend = "resend"
	// DecisionResendNewKey is DecisionResend for an op whose vendor key replays a stored
	// failure: the op moves to the next generation and a new vendor key.
	DecisionResendNewKey = "resend_new_key"
	// DecisionNoneReview found no object after the lookup lag for a vendor configured
	// not to resend (Config.ResendOnNone): a person decides.
	DecisionNoneReview = "none_found_review"
	// DecisionAttemptsExhausted found no object, but the op has had Config.MaxAttempts
	// attempts already: a person decides.
	DecisionAttemptsExhausted = "attempts_exhausted"
	// DecisionWait found no object while the vendor's lookup lag may still hide it: the
	// op is checked again once the lag is over.
	DecisionWait = "wait"
	// DecisionDuplicate found two or more objects for one op: a person decides.
	DecisionDuplicate = "duplicate"
	// DecisionLookupUnavailable means the vendor cannot be asked at all: a person
	// decides.
	DecisionLookupUnavailable = "lookup_unavailable"
	// DecisionLookupFailed means the lookup failed (rate limit, network): the op is
	// checked again after Config.RetryLookupAfter.
	DecisionLookupFailed = "lookup_failed"
)

// eventKind is the kind of the sweeper's events (their actor is opstate.Reconciler).
const eventKind = "reconcile"

// sinceMargin widens LookupParams.Since below the first attempt's start, for clock
// differences between Postgres and the vendor.
const sinceMargin = 5 * time.Minute

// Stats counts what one sweep did.
type Stats struct {
	// Looked is how many unknown ops were looked up at the vendor.
	Looked int
	// Succeeded and Failed count ops resolved from the one object the vendor holds.
	Succeeded, Failed int
	// Resent counts ops sent back to pending because the vendor holds nothing.
	Resent int
	// Waiting counts ops whose lookup lag is not over yet.
	Waiting int
	// NeedsReview counts ops handed to a person (duplicates and unavailable lookups
	// included).
	NeedsReview int
	// Duplicates counts ops for which the vendor holds two or more objects.
	Duplicates int
	// LookupErrors counts failed lookups, to be retried.
	LookupErrors int
	// Stuck counts ops moved from dispatching to unknown.
	Stuck int
	// Rejobbed counts pending ops given a new dispatch job; JobsDiscarded pending ops
	// sent to review because their job was discarded or cancelled.
	Rejobbed, JobsDiscarded int
	// Skipped counts ops a worker or a person resolved while their lookup ran.
	Skipped int
}

func (s *Stats) add(o Stats) {
	s.Looked += o.Looked
	s.Succeeded += o.Succeeded
	s.Failed += o.Failed
	s.Resent += o.Resent
	s.Waiting += o.Waiting
	s.NeedsReview += o.NeedsReview
	s.Duplicates += o.Duplicates
	s.LookupErrors += o.LookupErrors
	s.Stuck += o.Stuck
	s.Rejobbed += o.Rejobbed
	s.JobsDiscarded += o.JobsDiscarded
	s.Skipped += o.Skipped
}

// candidate is an op as the sweeper sees it.
type candidate struct {
	id, key, tool, vendor, vendorRef, token string
	tenantID                                int64
	args                                    json.RawMessage
	status                                  outbox.Status
	attempts, generation                    int
	staleKey                                bool
	createdAt                               time.Time
	dispatchStartedAt                       *time.Time
	firstStarted                            *time.Time
	unfinishedStarted, lastFinished         *time.Time
	// sealed says that the op's full args are sealed: its stored args are already
	// the redacted form.
	sealed bool
	// traceParent is the trace context the op was created under.
	traceParent string
}

func scanCandidate(row pgx.Row) (*candidate, error) {
	c := &candidate{}
	var status string
	err := row.Scan(&c.id, &c.tenantID, &c.key, &c.tool, &c.vendor, &c.args, &c.vendorRef, &status, &c.token,
		&c.attempts, &c.generation, &c.staleKey, &c.createdAt, &c.sealed, &c.dispatchStartedAt, &c.firstStarted,
		&c.unfinishedStarted, &c.lastFinished, &c.traceParent)
	if err != nil {
		return nil, err
	}
	c.status = outbox.Status(status)
	return c, nil
}

// since is the lower bound on the creation time of the op's objects.
func (c *candidate) since() time.Time {
	t := c.createdAt
	if c.firstStarted != nil {
		t = *c.firstStarted
	} else if c.dispatchStartedAt != nil {
		t = *c.dispatchStartedAt
	}
	return t.Add(-sinceMargin)
}

// lastSent is the latest moment the vendor may have created an object for the op: the
// end of its last finished attempt or, when a later or concurrent attempt never ended
// (its worker died mid-request), that attempt's start plus the job timeout, whichever
// is later.
func (c *candidate) lastSent(jobTimeout time.Duration) time.Time {
	switch {
	case c.unfinishedStarted != nil:
		t := c.unfinishedStarted.Add(jobTimeout)
		if c.lastFinished != nil && c.lastFinished.After(t) {
			t = *c.lastFinished
		}
		return t
	case c.lastFinished != nil:
		return *c.lastFinished
	case c.dispatchStartedAt != nil:
		return c.dispatchStartedAt.Add(jobTimeout)
	}
	return c.createdAt
}

// SweepOnce runs one pass: it moves stuck dispatching ops to unknown, then looks up at
// most Config.BatchSize unknown ops that are due and records a decision for each. An
// error about one op does not stop the others; the errors are returned together.
func (r *Reconciler) SweepOnce(ctx context.Context) (Stats, error) {
	var st Stats
	ob, err := r.outbox()
	if err != nil {
		return st, err
	}
	if err := r.unstick(ctx, ob, &st); err != nil {
		return st, err
	}
	if err := r.rejob(ctx, ob, &st); err != nil {
		return st, err
	}
	now := r.cfg.Now()
	// The lease outlives this sweep: a sweep is over (done, or cancelled by its
	// timeout) by then, so ops it did not reach come back to the next one.
	lease := now.Add(r.cfg.SweepTimeout)
	ids, err := ob.Link().Ops.LeaseUnknown(ctx, now, r.cfg.BatchSize, lease)
	if err != nil {
		return st, fmt.Errorf("reconcile: select unknown ops: %w", err)
	}
	// Up to Config.Concurrency ops are looked up at once; each check keeps stats of
	// its own, added up here.
	var (
		errs []error
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan string)
	)
	for range min(r.cfg.Concurrency, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				var one Stats
				err := r.check(ctx, ob, id, &one)
				mu.Lock()
				st.add(one)
				if err != nil {
					r.logger(ob).Error("reconcile: op not checked", slog.String("op_id", id), slog.Any("error", err))
					errs = append(errs, fmt.Errorf("op %s: %w", id, err))
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			// The ops left keep their lease and come back in a later sweep.
			mu.Lock()
			errs = append(errs, ctx.Err())
			mu.Unlock()
			break
		}
		next <- id
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return st, fmt.Errorf("reconcile: sweep: %w", err)
	}
	return st, nil
}

// unstick moves ops stuck in dispatching to unknown.
func (r *Reconciler) unstick(ctx context.Context, ob *outbox.Outbox, st *Stats) error {
	rows, err := ob.Pool().Query(ctx, sqlDispatchingVendors)
	if err != nil {
		return fmt.Errorf("reconcile: select dispatching vendors: %w", err)
	}
	vendors, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("reconcile: select dispatching vendors: %w", err)
	}
	if len(vendors) == 0 {
		return nil
	}
	now := r.cfg.Now()
	cutoffs := make([]time.Time, len(vendors))
	for i, v := range vendors {
		cutoffs[i] = now.Add(-ob.Link().JobTimeout(v) - r.cfg.StuckMargin)
	}
	type stuck struct {
		id, vendor string
		tenantID   int64
		started    time.Time
	}
	rows, err = ob.Pool().Query(ctx, sqlStuckDispatching, vendors, cutoffs, r.cfg.BatchSize)
	if err != nil {
		return fmt.Errorf("reconcile: select stuck ops: %w", err)
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stuck, error) {
		var s stuck
		err := row.Scan(&s.id, &s.tenantID, &s.vendor, &s.started)
		return s, err
	})
	if err != nil {
		return fmt.Errorf("reconcile: select stuck ops: %w", err)
	}
	ops := ob.Link().Ops.WithLogger(r.cfg.Logger)
	for _, s := range found {
		a, err := ops.ApplyTx(ctx, opstate.Change{OpID: s.id, From: outbox.StatusDispatching, To: outbox.StatusUnknown,
			By: opstate.Reconciler, Kind: eventKind, DispatchStartedAt: s.started,
			Detail: map[string]any{
				"decision":            DecisionStuck,
				"dispatch_started_at": s.started,
				"job_timeout":         ob.Link().JobTimeout(s.vendor).String(),
			},
			Message: "op stuck in dispatching with no job running; the reconciler decides", Level: slog.LevelWarn,
			Attrs: []any{slog.Time("dispatch_started_at", s.started)}})
		if err != nil {
			return fmt.Errorf("reconcile: op %s: mark stuck op unknown: %w", s.id, err)
		}
		if a != nil {
			st.Stuck++
			r.cfg.Observer.Decision(s.vendor, DecisionStuck)
		}
	}
	return nil
}

// jobless is a pending op without a live dispatch job, and what became of its last one.
type jobless struct {
	id, vendor string
	// jobState is the last job's River state, "" when it has none (deleted).
	jobState  string
	attempts  int
	lastError string
	// unheard: the job may have called the vendor without its answer being recorded.
	unheard bool
}

// decideJobless is what the sweeper does with a pending op without a live job: a job
// deleted (or completed while the op went back to pending) is replaced; a job River
// discarded (out of attempts) or someone cancelled would only fail again, or was stopped
// on purpose: a person decides.
func decideJobless(j jobless) (to outbox.Status, decision string, detail map[string]any) {
	switch j.jobState {
	case "discarded", "cancelled":
		reason := fmt.Sprintf("its dispatch job was %s after %d attempts", j.jobState, j.attempts)
		if j.lastError != "" {
			reason += "; last error: " + j.lastError
		}
		if j.unheard {
			reason += "; a run may have called the vendor without its answer being recorded (a release resends only inside the vendor's key window)"
		}
		return outbox.StatusNeedsReview, DecisionJobDiscarded, map[string]any{"decision": DecisionJobDiscarded,
			"job_state": j.jobState, "reason": reason}
	}
	reason := "its dispatch job was deleted"
	if j.jobState != "" {
		reason = "its dispatch job " + j.jobState + " while the op was pending"
	}
	if j.unheard {
		reason += "; it may have called the vendor without its answer being recorded, so the new job resends only inside the vendor's key window"
	}
	return outbox.StatusPending, DecisionRejob, map[string]any{"decision": DecisionRejob, "job_state": j.jobState, "reason": reason}
}

// rejob finds pending ops without a live dispatch job, unchanged for StuckMargin, and
// gives each a new job or hands it to a person (decideJobless). A new job is a unique
// insert: if a live one appeared meanwhile, none is added.
func (r *Reconciler) rejob(ctx context.Context, ob *outbox.Outbox, st *Stats) error {
	rows, err := ob.Pool().Query(ctx, sqlJoblessPending, r.cfg.Now().Add(-r.cfg.StuckMargin), r.cfg.BatchSize)
	if err != nil {
		return fmt.Errorf("reconcile: select pending ops without a job: %w", err)
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (jobless, error) {
		var j jobless
		err := row.Scan(&j.id, &j.vendor, &j.jobState, &j.attempts, &j.lastError, &j.unheard)
		return j, err
	})
	if err != nil {
		return fmt.Errorf("reconcile: select pending ops without a job: %w", err)
	}
	ops := ob.Link().Ops.WithLogger(r.cfg.Logger)
	for _, j := range found {
		to, decision, detail := decideJobless(j)
		msg := "pending op without a dispatch job given a new one"
		if to == outbox.StatusNeedsReview {
			msg = "pending op whose dispatch job was discarded or cancelled; it needs review"
		}
		a, err := ops.ApplyTx(ctx, opstate.Change{OpID: j.id, From: outbox.StatusPending, To: to, By: opstate.Reconciler,
			Kind: eventKind, Detail: detail, Message: msg, Level: slog.LevelWarn, Unheard: j.unheard,
			Attrs: []any{slog.String("decision", decision), slog.String("job_state", j.jobState)}})
		if err != nil {
			return fmt.Errorf("reconcile: op %s: %s: %w", j.id, decision, err)
		}
		if a == nil {
			continue
		}
		r.cfg.Observer.Decision(j.vendor, decision)
		if to == outbox.StatusNeedsReview {
			st.JobsDiscarded++
			st.NeedsReview++
		} else {
			st.Rejobbed++
		}
	}
	return nil
}

// check looks one op up at its vendor and records the decision.
func (r *Reconciler) check(ctx context.Context, ob *outbox.Outbox, id string, st *Stats) error {
	c, err := scanCandidate(ob.Pool().QueryRow(ctx, sqlCandidate, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read op: %w", err)
	}
	if c.status != outbox.StatusUnknown {
		st.Skipped++
		return nil
	}
	// The lookup, its log lines and the decision belong to the op's trace.
	ctx = tracing.ContextWithRemote(ctx, c.traceParent)
	log := r.logger(ob).With(append([]any{slog.Int64("tenant", c.tenantID), slog.String("op_id", c.id),
		slog.String("idempotency_key", c.key), slog.String("vendor", c.vendor)}, tracing.LogAttrs(c.traceParent)...)...)

	// The vendor is asked without any lock held: a worker may record a result meanwhile,
	// which the decision below then respects.
	st.Looked++
	askedAt := r.cfg.Now()
	vendor, ok := ob.Link().Vendor(c.vendor)
	var (
		res  *outbox.LookupResult
		lerr error
		lag  time.Duration
	)
	if !ok {
		lerr = fmt.Errorf("vendor %q is not configured in this process", c.vendor)
	} else {
		lag = vendor.LookupLag()
		res, lerr = vendor.Lookup(ctx, outbox.LookupParams{
			OpID: c.id, TenantID: c.tenantID, Tool: c.tool, Args: c.args, VendorRef: c.vendorRef, Since: c.since(),
			LastSent: c.lastSent(ob.Link().JobTimeout(c.vendor)),
		})
	}
	if lerr != nil && ctx.Err() != nil {
		return fmt.Errorf("lookup: %w", lerr)
	}
	resendOnNone, set := r.cfg.ResendOnNone[c.vendor]
	d := decide(lookupAnswer{c: c, res: res, err: lerr, askedAt: askedAt, lag: lag, jobTimeout: ob.Link().JobTimeout(c.vendor)},
		policy{now: r.cfg.Now(), retryLookupAfter: r.cfg.RetryLookupAfter, maxAttempts: r.cfg.MaxAttempts,
			resendOnNone: !set || resendOnNone})
	if d.change.To.Terminal() {
		redact(ob.Tools(), c, &d.change)
	}

	var applied *opstate.Applied
	err = pgx.BeginFunc(ctx, ob.Pool(), func(tx pgx.Tx) error {
		cur, err := scanCandidate(tx.QueryRow(ctx, sqlCandidateForUpdate, c.id))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock op: %w", err)
		}
		if cur.status != outbox.StatusUnknown || cur.token != c.token {
			return nil // a worker or a person recorded an outcome meanwhile
		}
		applied, err = ob.Link().Ops.WithLogger(r.cfg.Logger).Apply(ctx, tx, d.change)
		return err
	})
	if err != nil {
		return fmt.Errorf("record decision %s: %w", d.name, err)
	}
	if applied == nil {
		st.Skipped++
		log.Info("op resolved while the reconciler asked the vendor; decision dropped", slog.String("decision", d.name))
		return nil
	}
	applied.Report()
	r.cfg.Observer.Decision(c.vendor, d.name)
	switch d.name {
	case DecisionSucceeded:
		st.Succeeded++
	case DecisionRefused:
		st.Failed++
	case DecisionResend, DecisionResendNewKey:
		st.Resent++
	case DecisionWait:
		st.Waiting++
	case DecisionLookupFailed:
		st.LookupErrors++
	case DecisionDuplicate:
		st.Duplicates++
		st.NeedsReview++
		r.cfg.Observer.Duplicate(c.vendor)
		log.Error("vendor holds several objects for one op; it needs review",
			slog.Any("object_ids", d.ids))
	default:
		st.NeedsReview++
	}
	return nil
}
