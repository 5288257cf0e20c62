package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// Sweep runs one round of the reconciler, a sweep: it moves stuck dispatching ops to
// unknown, gives pending ops whose dispatch job is gone a new one (or hands them to a
// person), then looks up at most Config.BatchSize unknown ops that are due and records a
// decision for each. An error about one op does not stop the others; the errors are
// returned together.
func (r *Reconciler) Sweep(ctx context.Context) (Stats, error) {
	var st Stats
	if err := r.due(ctx, &st); err != nil {
		return st, err
	}
	now := r.cfg.Now()
	// The lease outlives this sweep: a sweep is over (done, or cancelled by its
	// timeout) by then, so ops it did not reach come back to the next one.
	lease := now.Add(r.cfg.Timeout)
	ids, err := r.deps.Ops.LeaseUnknown(ctx, now, r.cfg.BatchSize, lease)
	if err != nil {
		return st, fmt.Errorf("reconcile: sweep: select unknown ops: %w", err)
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
				err := r.check(ctx, id, &one)
				mu.Lock()
				st.add(one)
				if err != nil {
					r.deps.Logger.Error("outbox: sweep: op not checked", slog.String("op_id", id), slog.Any("error", err))
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

// dueEntry is an op the sweeper must look at (oncebox_op_due), as read.
type dueEntry struct {
	id, version, vendor string
	status              protocol.Status
	started, updated    *time.Time
}

// duePlan is what a sweep does with the due entries it read: remove them, move them
// to a later due time, or evaluate them as stuck (dispatching) or jobless (pending).
type duePlan struct {
	byID                    map[string]dueEntry
	doneIDs, doneVersions   []string
	laterIDs, laterVersions []string
	laterAt                 []time.Time
	stuckIDs, pendingIDs    []string
	stuckCutoffs            []time.Time
}

func (p *duePlan) done(e dueEntry) {
	p.doneIDs, p.doneVersions = append(p.doneIDs, e.id), append(p.doneVersions, e.version)
}

func (p *duePlan) later(e dueEntry, at time.Time) {
	p.laterIDs, p.laterVersions, p.laterAt = append(p.laterIDs, e.id), append(p.laterVersions, e.version), append(p.laterAt, at)
}

// planDue sorts the due entries: a dispatching op past its vendor's job timeout plus
// StuckMargin, or a pending op unchanged for StuckMargin, is evaluated; one not yet
// past its margin is looked at again when it will be; any other (gone, or in a status
// whose work is found another way: unknown by the lease, needs review by the review
// list) leaves the list.
func (r *Reconciler) planDue(entries []dueEntry, now time.Time) *duePlan {
	p := &duePlan{byID: make(map[string]dueEntry, len(entries))}
	for _, e := range entries {
		p.byID[e.id] = e
		switch {
		case e.status == protocol.StatusDispatching && e.started != nil:
			wait := r.deps.JobTimeout(e.vendor) + r.cfg.StuckMargin
			if cutoff := now.Add(-wait); e.started.Before(cutoff) {
				p.stuckIDs, p.stuckCutoffs = append(p.stuckIDs, e.id), append(p.stuckCutoffs, cutoff)
			} else {
				p.later(e, e.started.Add(wait))
			}
		case e.status == protocol.StatusPending && e.updated != nil:
			if e.updated.Before(now.Add(-r.cfg.StuckMargin)) {
				p.pendingIDs = append(p.pendingIDs, e.id)
			} else {
				p.later(e, e.updated.Add(r.cfg.StuckMargin))
			}
		default:
			p.done(e)
		}
	}
	return p
}

// due looks at the ops due in oncebox_op_due (planDue): it moves the dispatching ones
// that are stuck (no dispatch job runs) to unknown, and gives the pending ones whose
// dispatch job is gone a new one or hands them to a person (rejob). An op that needs
// nothing more (its job is live, or it moved on) leaves the list, and comes back when a
// trigger puts it there again.
func (r *Reconciler) due(ctx context.Context, st *Stats) error {
	now := r.cfg.Now()
	rows, err := r.deps.Pool.Query(ctx, sqlDue, now, r.cfg.BatchSize)
	if err != nil {
		return fmt.Errorf("reconcile: sweep: select due ops: %w", err)
	}
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dueEntry, error) {
		var e dueEntry
		err := row.Scan(&e.id, &e.version, &e.status, &e.vendor, &e.started, &e.updated)
		return e, err
	})
	if err != nil {
		return fmt.Errorf("reconcile: sweep: select due ops: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	p := r.planDue(entries, now)
	if len(p.stuckIDs) > 0 {
		moved, err := r.unstick(ctx, st, p.stuckIDs, p.stuckCutoffs, p.byID)
		if err != nil {
			return err
		}
		for _, id := range p.stuckIDs {
			if e := p.byID[id]; moved[id] {
				p.done(e)
			} else {
				// A dispatch job runs it (or it moved on): look again once that job
				// could have timed out.
				p.later(e, now.Add(r.deps.JobTimeout(e.vendor)+r.cfg.StuckMargin))
			}
		}
	}
	if len(p.pendingIDs) > 0 {
		if err := r.rejob(ctx, st, now.Add(-r.cfg.StuckMargin), p.pendingIDs); err != nil {
			return err
		}
		// Rejobbed, handed to a person, or with a live job: a job that stops later puts
		// the op back on the list.
		for _, id := range p.pendingIDs {
			p.done(p.byID[id])
		}
	}
	if len(p.doneIDs) > 0 {
		if _, err := r.deps.Pool.Exec(ctx, sqlDueDone, p.doneIDs, p.doneVersions); err != nil {
			return fmt.Errorf("reconcile: sweep: remove ops looked at from the due list: %w", err)
		}
	}
	if len(p.laterIDs) > 0 {
		if _, err := r.deps.Pool.Exec(ctx, sqlDueLater, p.laterIDs, p.laterVersions, p.laterAt); err != nil {
			return fmt.Errorf("reconcile: sweep: reschedule due ops: %w", err)
		}
	}
	return nil
}

// unstick moves the ops among ids that are stuck in dispatching (cutoffs: their
// vendor's) to unknown, and says which it moved.
func (r *Reconciler) unstick(ctx context.Context, st *Stats, ids []string, cutoffs []time.Time, byID map[string]dueEntry) (map[string]bool, error) {
	rows, err := r.deps.Pool.Query(ctx, sqlStuckDispatching, ids, cutoffs)
	if err != nil {
		return nil, fmt.Errorf("reconcile: sweep: select stuck ops: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("reconcile: sweep: select stuck ops: %w", err)
	}
	moved := make(map[string]bool, len(found))
	ops := r.deps.Ops
	for _, id := range found {
		s := byID[id]
		a, err := ops.ApplyTx(ctx, opstate.Change{OpID: s.id, From: protocol.StatusDispatching, To: protocol.StatusUnknown,
			By: opstate.Reconciler, Kind: eventKind, DispatchStartedAt: *s.started,
			Detail: map[string]any{
				"decision":            Stuck,
				"dispatch_started_at": *s.started,
				"job_timeout":         r.deps.JobTimeout(s.vendor).String(),
			},
			Message: "op stuck in dispatching with no job running; the reconciler decides", Level: slog.LevelWarn,
			Attrs: []any{slog.Time("dispatch_started_at", *s.started)}})
		if err != nil {
			return nil, fmt.Errorf("reconcile: sweep: op %s: mark stuck op unknown: %w", s.id, err)
		}
		moved[id] = true
		if a != nil {
			st.Stuck++
			r.cfg.Observer.Decision(s.vendor, Stuck)
		}
	}
	return moved, nil
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

// decideJobless is what the reconciler does with a pending op without a live job: a job
// deleted (or completed while the op went back to pending) is replaced; a job River
// discarded (out of attempts) or someone cancelled would only fail again, or was stopped
// on purpose: a person decides.
func decideJobless(j jobless) (to protocol.Status, name string, detail map[string]any) {
	switch j.jobState {
	case "discarded", "cancelled":
		reason := fmt.Sprintf("its dispatch job was %s after %d attempts", j.jobState, j.attempts)
		if j.lastError != "" {
			reason += "; last error: " + j.lastError
		}
		if j.unheard {
			reason += "; a run may have called the vendor without its answer being recorded (a release resends only inside the vendor's key window)"
		}
		return protocol.StatusNeedsReview, JobDiscarded, map[string]any{"decision": JobDiscarded,
			"job_state": j.jobState, "reason": reason}
	}
	reason := "its dispatch job was deleted"
	if j.jobState != "" {
		reason = "its dispatch job " + j.jobState + " while the op was pending"
	}
	if j.unheard {
		reason += "; it may have called the vendor without its answer being recorded, so the new job resends only inside the vendor's key window"
	}
	return protocol.StatusPending, Rejob, map[string]any{"decision": Rejob, "job_state": j.jobState, "reason": reason}
}

// rejob finds the pending ops among ids without a live dispatch job, unchanged since
// cutoff, and gives each a new job or hands it to a person (decideJobless). A new job
// is a unique insert: if a live one appeared meanwhile, none is added.
func (r *Reconciler) rejob(ctx context.Context, st *Stats, cutoff time.Time, ids []string) error {
	rows, err := r.deps.Pool.Query(ctx, sqlJoblessPending, cutoff, ids)
	if err != nil {
		return fmt.Errorf("reconcile: sweep: select pending ops without a job: %w", err)
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (jobless, error) {
		var j jobless
		err := row.Scan(&j.id, &j.vendor, &j.jobState, &j.attempts, &j.lastError, &j.unheard)
		return j, err
	})
	if err != nil {
		return fmt.Errorf("reconcile: sweep: select pending ops without a job: %w", err)
	}
	ops := r.deps.Ops
	for _, j := range found {
		to, name, detail := decideJobless(j)
		msg := "pending op without a dispatch job given a new one"
		if to == protocol.StatusNeedsReview {
			msg = "pending op whose dispatch job was discarded or cancelled; it needs review"
		}
		a, err := ops.ApplyTx(ctx, opstate.Change{OpID: j.id, From: protocol.StatusPending, To: to, By: opstate.Reconciler,
			Kind: eventKind, Detail: detail, Message: msg, Level: slog.LevelWarn, Unheard: j.unheard,
			Attrs: []any{slog.String("decision", name), slog.String("job_state", j.jobState)}})
		if err != nil {
			return fmt.Errorf("reconcile: sweep: op %s: %s: %w", j.id, name, err)
		}
		if a == nil {
			continue
		}
		r.cfg.Observer.Decision(j.vendor, name)
		if to == protocol.StatusNeedsReview {
			st.JobsDiscarded++
			st.NeedsReview++
		} else {
			st.Rejobbed++
		}
	}
	return nil
}

// check looks one op up at its vendor and records the decision.
func (r *Reconciler) check(ctx context.Context, id string, st *Stats) error {
	c, err := scanCandidate(r.deps.Pool.QueryRow(ctx, sqlCandidate, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read op: %w", err)
	}
	if c.status != protocol.StatusUnknown {
		st.Skipped++
		return nil
	}
	// The lookup, its log lines and the decision belong to the op's trace.
	ctx = tracing.ContextWithRemote(ctx, c.traceParent)
	log := r.deps.Logger.With(append([]any{slog.Int64("tenant", c.tenantID), slog.String("op_id", c.id),
		slog.String("idempotency_key", c.key), slog.String("vendor", c.vendor)}, tracing.LogAttrs(c.traceParent)...)...)

	// The vendor is asked without any lock held: a worker may record a result meanwhile,
	// which the decision below then respects.
	st.Looked++
	answer := r.lookup(ctx, c)
	if answer.err != nil && ctx.Err() != nil {
		return fmt.Errorf("lookup: %w", answer.err)
	}
	resendOnNone, set := r.cfg.ResendOnNone[c.vendor]
	d := decide(answer, policy{now: r.cfg.Now(), retryLookupAfter: r.cfg.RetryLookupAfter, maxAttempts: r.cfg.MaxAttempts,
		resendOnNone: !set || resendOnNone})
	if d.change.To.Terminal() {
		redact(r.deps.Tools, c, &d.change)
	}
	applied, err := r.record(ctx, c, d)
	if err != nil {
		return fmt.Errorf("record decision %s: %w", d.name, err)
	}
	if applied == nil {
		st.Skipped++
		log.Info("op resolved while the reconciler asked the vendor; decision dropped", slog.String("decision", d.name))
		return nil
	}
	applied.Report()
	r.count(c.vendor, d, st, log)
	return nil
}

// lookup asks the op's vendor for the objects tagged with it.
func (r *Reconciler) lookup(ctx context.Context, c *candidate) lookupAnswer {
	a := lookupAnswer{c: c, askedAt: r.cfg.Now(), jobTimeout: r.deps.JobTimeout(c.vendor)}
	vendor, ok := r.deps.Vendors[c.vendor]
	if !ok {
		a.err = fmt.Errorf("vendor %q is not configured in this process", c.vendor)
		return a
	}
	a.lag = vendor.LookupLag()
	acct, err := r.deps.Accounts.Account(ctx, c.tenantID, c.vendor, c.vendorAccount)
	if err != nil {
		a.err = fmt.Errorf("%w: %w", vendorapi.ErrLookupUnavailable, err)
		return a
	}
	a.res, a.err = vendor.Lookup(ctx, vendorapi.LookupParams{
		OpID: c.id, TenantID: c.tenantID, Tool: c.tool, Args: c.args, VendorRef: c.vendorRef, Since: c.since(),
		LastSent: c.lastSent(a.jobTimeout), Account: acct,
	})
	return a
}

// record writes the decision in a transaction that locks the op and checks that it is
// still unknown with the same attempt token. It returns nil, nil when a worker or a
// person recorded an outcome meanwhile.
func (r *Reconciler) record(ctx context.Context, c *candidate, d settlement) (*opstate.Applied, error) {
	var applied *opstate.Applied
	err := pgx.BeginFunc(ctx, r.deps.Pool, func(tx pgx.Tx) error {
		cur, err := scanCandidate(tx.QueryRow(ctx, sqlCandidateForUpdate, c.id))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock op: %w", err)
		}
		if cur.status != protocol.StatusUnknown || cur.token != c.token {
			return nil // a worker or a person recorded an outcome meanwhile
		}
		applied, err = r.deps.Ops.Apply(ctx, tx, d.change)
		return err
	})
	return applied, err
}

// count adds a recorded decision to the sweep's stats and the observer.
func (r *Reconciler) count(vendor string, d settlement, st *Stats, log *slog.Logger) {
	r.cfg.Observer.Decision(vendor, d.name)
	switch d.name {
	case Succeeded:
		st.Succeeded++
	case Refused:
		st.Failed++
	case Resend, ResendNewKey:
		st.Resent++
	case Wait:
		st.Waiting++
	case LookupFailed:
		st.LookupErrors++
	case Duplicate:
		st.Duplicates++
		st.NeedsReview++
		r.cfg.Observer.Duplicate(vendor)
		log.Error("vendor holds several objects for one op; it needs review",
			slog.Any("object_ids", d.ids))
	default:
		st.NeedsReview++
	}
}
