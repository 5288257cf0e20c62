package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// Args is the River job that dispatches one op.
type Args struct {
	// OpID is the op to dispatch; an op has at most one live dispatch job.
	OpID   string `json:"op_id" river:"unique"`
	Vendor string `json:"vendor"`
}

// Kind implements river.JobArgs.
func (Args) Kind() string { return "oncebox.dispatch" }

// fencedRecheck is how long a fenced run's job waits before it looks at its op again.
const fencedRecheck = 2 * time.Second

// cleanReadRetry is how long a job whose clean read failed waits before it tries again.
const cleanReadRetry = time.Second

// worker is the River worker of Args.
type worker struct {
	river.WorkerDefaults[Args]
	d *Dispatcher
}

// Timeout gives each vendor's dispatch its own queue's job timeout.
func (w *worker) Timeout(job *river.Job[Args]) time.Duration {
	return w.d.deps.JobTimeout(job.Args.Vendor)
}

// NextRetry applies Config.RetryBackoff.
func (w *worker) NextRetry(job *river.Job[Args]) time.Time {
	return time.Now().Add(w.d.cfg.RetryBackoff(job.Attempt))
}

// claim is what the claiming transaction learned.
type claim struct {
	op        *opRow
	token     string
	attempt   int
	startedAt time.Time
	// keyFirstSentAt is when the op's current vendor key was first sent: the start
	// of the vendor's native key window.
	keyFirstSentAt time.Time
	// resendBefore is set when an earlier request under the op's vendor key may have
	// been carried out unheard: the op may be sent only before it.
	resendBefore *time.Time
	// done is set when the job has nothing (more) to do.
	done bool
	// snooze, when set, is how long the job waits before it looks at its op again:
	// the op's latest attempt may still be running.
	snooze time.Duration
	// sealedArgs is the sealed copy of the op's full arguments, when its tool redacts.
	sealedArgs []byte
	// sealed is set when op.Args were opened from sealedArgs (the stored args are
	// already redacted).
	sealed bool
	// definition is the tool definition stored with the op (Tool.Definition).
	definition json.RawMessage
	// account is the vendor account the op was accepted under, its key opened.
	account vendorapi.Account
	// clean is set for a clean run, which calls the vendor without a claim commit
	// (River's fetch was the claim; see readClean); heard is the op's heard run as it
	// read it, the fence of its record.
	clean bool
	heard opstate.Heard
}

// Work dispatches one op. A clean run (readClean) reads the op, calls the vendor and
// records the answer fenced by its job's (id, attempt); any other run claims (commits
// dispatching with a fresh token), calls the vendor and records the answer where the
// token still matches. Either record completes the job in the same transaction.
func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	d := w.d
	vendor, ok := d.deps.Vendors[job.Args.Vendor]
	if !ok {
		return fmt.Errorf("op %s: vendor %q is not configured in this process", job.Args.OpID, job.Args.Vendor)
	}
	if t, ok := vendor.(vendorapi.Throttler); ok {
		if wait := t.Throttle(); wait > 0 {
			return river.JobSnooze(wait)
		}
	}
	if !d.liveOK() {
		// This process's liveness lock is not confirmed held: another process may
		// prove it gone and take the op over, so it calls no vendor. A snooze keeps the
		// attempt number (the next run stays clean).
		return river.JobSnooze(cleanReadRetry)
	}
	c, err := d.claimRun(ctx, job, vendor)
	if err != nil {
		return err
	}
	if c.snooze > 0 {
		return river.JobSnooze(c.snooze)
	}
	if c.done {
		return nil
	}
	return d.dispatch(ctx, job, vendor, c)
}

// claimRun returns this run's claim: a clean read (readClean) when the run need not
// commit its claim and is clean, the locking claim (claim) otherwise.
func (d *Dispatcher) claimRun(ctx context.Context, job *river.Job[Args], vendor vendorapi.Vendor) (*claim, error) {
	if !d.claimCommit() {
		c, err := d.readClean(ctx, job)
		if err != nil {
			// Nothing was sent. A snooze keeps the job's attempt number, so that its next
			// run is still clean (an error would make it look like a run that may have
			// called the vendor unheard).
			d.deps.Logger.Warn("dispatch: could not read the op; the job looks again shortly", slog.String("op_id", job.Args.OpID),
				slog.Int64("job_id", job.ID), slog.String("error", err.Error()))
			return nil, river.JobSnooze(cleanReadRetry)
		}
		if c != nil {
			return c, nil
		}
	}
	return d.claim(ctx, job, vendor)
}

// dispatch calls the vendor for the claimed op c.op, decides what to record of its answer
// (recordOf) and records it.
func (d *Dispatcher) dispatch(ctx context.Context, job *river.Job[Args], vendor vendorapi.Vendor, c *claim) error {
	op := c.op
	ctx, span := d.startDispatch(ctx, op, c.attempt)
	spanOutcome, spanRef := "not_sent", ""
	defer func() { endSpan(span, spanOutcome, spanRef, nil) }()
	log := d.opLogger(op).With(slog.Int("attempt", c.attempt))
	if p := d.withhold(ctx, vendor, c); p != nil {
		return d.record(context.WithoutCancel(ctx), job, c, log, *p)
	}

	start := time.Now()
	res, derr := d.callVendor(ctx, vendor, c)
	took := time.Since(start)

	// Record with a context that outlives a job timeout or a shutdown: the vendor has
	// answered (or not), and that must be written down.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()

	windowEnd, windowOpen := keyWindowEnd(vendor, c.keyFirstSentAt)
	rec := recordOf(answer{res: res, err: derr, claimResendBefore: c.resendBefore, windowEnd: windowEnd, windowOpen: windowOpen,
		exhausted: c.attempt >= d.cfg.MaxAttempts || job.Attempt >= job.MaxAttempts})
	d.deps.Observer.Dispatched(vendor.Name(), rec.observed, took)
	spanOutcome, spanRef = rec.observed, rec.record.vendorRef
	if rec.bug {
		log.Error("vendor reports a bug in oncebox (the same vendor key was sent with other parameters); op needs review",
			slog.String("code", rec.err.Code))
	}
	rec.record.snoozes = rec.record.keepJob && rec.retryAfter > 0
	if err := d.record(rctx, job, c, log, rec.record); err != nil || !rec.record.keepJob {
		return err
	}
	if rec.retryAfter > 0 {
		return river.JobSnooze(rec.retryAfter)
	}
	return fmt.Errorf("op %s: retryable vendor error, River will retry: %w", op.ID, rec.err)
}

// withhold returns the record of a claimed op that must not be sent, or nil when it
// may: a resend whose key window the vendor (as configured now) no longer keeps, or
// sealed arguments this process cannot open. An op that may be sent has its sealed
// arguments opened into c.op.Args.
func (d *Dispatcher) withhold(ctx context.Context, vendor vendorapi.Vendor, c *claim) *recordParams {
	op := c.op
	if p := d.withholdAccount(ctx, c); p != nil {
		return p
	}
	if c.resendBefore != nil {
		if _, open := keyWindowEnd(vendor, c.keyFirstSentAt); !open {
			// An earlier request under this key may have been carried out, and the
			// vendor (as configured now) no longer deduplicates it: do not send.
			msg := "not resent: an earlier request under this vendor key may have been carried out and the vendor no longer deduplicates the key; the reconciler decides"
			errJSON, _ := json.Marshal(map[string]string{"class": "unknown", "code": "resend_window_passed", "message": msg})
			return &recordParams{status: protocol.StatusUnknown, errJSON: errJSON, outcome: "not_sent", errText: msg}
		}
	}
	if c.sealedArgs != nil {
		full, err := d.deps.Sealed.Open(op.TenantID, op.Key, c.sealedArgs)
		if err != nil {
			// Without its arguments the op cannot be sent: a person decides. This attempt
			// sends nothing; an earlier one may have been carried out only if it went out
			// unanswered (resendBefore is set then).
			errJSON, _ := json.Marshal(map[string]string{"class": "sealed_args", "message": err.Error() +
				" (the seal key differs from the one of the process that recorded the op: set the same ONCEBOX_SEAL_KEY on every process)"})
			if c.resendBefore == nil {
				errJSON = withNothingSent(errJSON)
			}
			return &recordParams{status: protocol.StatusNeedsReview, errJSON: errJSON, outcome: "not_sent", errText: err.Error()}
		}
		op.Args = json.RawMessage(full)
		c.sealed = true
	}
	return nil
}

// withholdAccount opens the key of an op sent with its tenant's own key into c.account,
// or returns the record of an op that cannot be sent without it: a person decides, as
// for sealed arguments that cannot be opened.
func (d *Dispatcher) withholdAccount(ctx context.Context, c *claim) *recordParams {
	op := c.op
	acct, err := d.deps.Accounts.Account(ctx, op.TenantID, op.Vendor, op.VendorAccount)
	if err == nil {
		c.account = acct
		return nil
	}
	errJSON, _ := json.Marshal(map[string]string{"class": "vendor_account", "message": err.Error() +
		" (set the same ONCEBOX_SEAL_KEY on every process, or resolve the op by hand)"})
	if c.resendBefore == nil {
		errJSON = withNothingSent(errJSON)
	}
	return &recordParams{status: protocol.StatusNeedsReview, errJSON: errJSON, outcome: "not_sent", errText: err.Error()}
}

// callVendor calls the vendor for the claimed op c.op, in a span of its own.
func (d *Dispatcher) callVendor(ctx context.Context, vendor vendorapi.Vendor, c *claim) (*vendorapi.DispatchResult, error) {
	op := c.op
	vctx, vspan := d.startVendorCall(ctx, vendor.Name())
	res, derr := vendor.Dispatch(vctx, vendorapi.DispatchParams{
		OpID: op.ID, TenantID: op.TenantID, Tool: op.Tool, Args: op.Args, VendorKey: op.VendorKey, Attempt: c.attempt,
		Definition: c.definition, Account: c.account,
	})
	if vspan != nil {
		ref := ""
		if res != nil {
			ref = res.VendorRef
		}
		endSpan(vspan, "", ref, derr)
	}
	return res, derr
}

// keyResendMargin is how long before the end of a vendor's key window oncebox stops
// resending under that key.
const keyResendMargin = time.Minute

// keyWindowEnd returns until when a request first sent under a key at firstSent may be
// resent under it (the vendor's window less keyResendMargin), and whether that is
// still in the future. A vendor that does not deduplicate keys has no window.
func keyWindowEnd(vendor vendorapi.Vendor, firstSent time.Time) (time.Time, bool) {
	idem := vendor.Idempotency()
	if !idem.Native || firstSent.IsZero() {
		return time.Time{}, false
	}
	end := firstSent.Add(idem.Window - keyResendMargin)
	return end, time.Now().Before(end)
}

func dispatchErrorJSON(de *vendorapi.DispatchError) json.RawMessage {
	body := de.Body
	if len(body) > 0 && !json.Valid(body) {
		b, _ := json.Marshal(string(body))
		body = b
	}
	out, _ := json.Marshal(struct {
		Class      string          `json:"class"`
		Code       string          `json:"code,omitempty"`
		Message    string          `json:"message,omitempty"`
		HTTPStatus int             `json:"http_status,omitempty"`
		Vendor     json.RawMessage `json:"vendor,omitempty"`
	}{de.Outcome.String(), de.Code, de.Message, de.HTTPStatus, body})
	return out
}

// readClean reads the op for a clean run: one that may call the vendor with no claim
// commit, because River's fetch committed its job running at a new attempt number and
// no earlier run of the op may have called the vendor without its answer being recorded
// (opstate.CleanRunSQL). It writes nothing. It returns nil, nil when the op is not
// pending, is past its resend_before, or the run is not clean: the locking path (claim)
// then decides.
func (d *Dispatcher) readClean(ctx context.Context, job *river.Job[Args]) (*claim, error) {
	op := &opRow{}
	c := &claim{op: op, clean: true}
	var keyFirstSentAt *time.Time
	err := d.deps.Pool.QueryRow(ctx, sqlOpForCleanRun, job.Args.OpID, job.ID, job.Attempt).Scan(append(op.scanDest(),
		&keyFirstSentAt, &c.sealedArgs, &c.resendBefore, &c.definition, &c.heard.JobID, &c.heard.Attempt)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("op %s: read for a clean run: %w", job.Args.OpID, err)
	}
	op.fromScan()
	c.attempt = op.Attempts + 1
	op.Attempts = c.attempt
	c.startedAt = time.Now()
	if job.AttemptedAt != nil {
		c.startedAt = *job.AttemptedAt
	}
	// The record sets the key's first send to the job's attempted_at when it has none.
	c.keyFirstSentAt = c.startedAt
	if keyFirstSentAt != nil {
		c.keyFirstSentAt = *keyFirstSentAt
	}
	return c, nil
}

// claim locks the op, decides whether this job may call the vendor (planClaim), and
// if so commits the op as dispatching with a fresh attempt token.
func (d *Dispatcher) claim(ctx context.Context, job *river.Job[Args], vendor vendorapi.Vendor) (*claim, error) {
	if c, err := d.claimPending(ctx, job); err != nil || c != nil {
		return c, err
	}
	c := &claim{}
	var applied *opstate.Applied
	err := pgx.BeginFunc(ctx, d.deps.Pool, func(tx pgx.Tx) error {
		var err error
		applied, err = d.claimLocked(ctx, tx, job, vendor, c)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("op %s: claim: %w", job.Args.OpID, err)
	}
	applied.Report()
	return c, nil
}

// claimLocked is claim's transaction: it locks the op into c, and carries out
// planClaim's plan for it.
func (d *Dispatcher) claimLocked(ctx context.Context, tx pgx.Tx, job *river.Job[Args], vendor vendorapi.Vendor, c *claim) (*opstate.Applied, error) {
	op := &opRow{}
	var (
		f              claimFound
		token          *string
		keyFirstSentAt *time.Time
		staleKey       bool
		resendBefore   *time.Time
	)
	dest := append(op.scanDest(), &token, &keyFirstSentAt, &staleKey, &c.sealedArgs, &resendBefore, &f.resendPassed, &f.mayRunSecs,
		&c.definition, &f.clean)
	if err := tx.QueryRow(ctx, sqlOpByIDForUpdate, job.Args.OpID, d.deps.JobTimeout(vendor.Name()).Seconds(), job.ID, job.Attempt).Scan(dest...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			// The op was purged or its tenant deleted: nothing to dispatch.
			c.done = true
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return nil, err
		}
		return nil, fmt.Errorf("lock op: %w", err)
	}
	op.fromScan()
	c.op = op
	f.status = op.Status

	plan := planClaim(f)
	switch plan.step {
	case claimMarkUnheard:
		first, ok, err := d.deps.Ops.MarkUnheard(ctx, tx, op.ID, job.ID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errors.New("mark unheard run: op is no longer pending")
		}
		_, open := keyWindowEnd(vendor, first)
		plan = plan.window(open)
	case claimCloseLost:
		if err := d.deps.Ops.CloseLostAttempts(ctx, tx, op.ID, job.ID); err != nil {
			return nil, err
		}
		open := false
		if keyFirstSentAt != nil {
			_, open = keyWindowEnd(vendor, *keyFirstSentAt)
		}
		plan = plan.window(open)
	}

	switch plan.step {
	case claimComplete:
		c.done = true
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return nil, err
	case claimSnooze:
		c.snooze = plan.snooze
		return nil, nil
	case claimHandOver:
		c.done = true
		detail := map[string]any{"reason": plan.reason, "job_id": job.ID}
		if plan.kind == kindResendWindowPassed {
			detail["resend_before"] = *resendBefore
		}
		return d.toReconciler(ctx, tx, job, op, plan.kind, detail)
	}
	return d.claimOp(ctx, tx, job, vendor, c, plan.insideWindow)
}

// claimOp commits the locked op c.op as dispatching with a fresh attempt token, and
// fills c with the claim. With insideWindow (a predecessor's request may have been
// carried out), the op may be sent only inside its vendor key's window.
func (d *Dispatcher) claimOp(ctx context.Context, tx pgx.Tx, job *river.Job[Args], vendor vendorapi.Vendor, c *claim, insideWindow bool) (*opstate.Applied, error) {
	op := c.op
	cl, a, err := d.deps.Ops.Claim(ctx, tx, op.Status, op.ident(), job.ID, d.cfg.ClientID)
	if err != nil {
		return nil, err
	}
	op.VendorKey, op.Attempts = cl.VendorKey, cl.Attempt
	c.attempt, c.token, c.startedAt, c.keyFirstSentAt, c.resendBefore = cl.Attempt, cl.Token, cl.StartedAt, cl.KeyFirstSentAt, cl.ResendBefore
	if insideWindow && c.resendBefore == nil {
		// The dead predecessor's request may have been carried out: this resend,
		// and any later one, must stay inside the key window.
		end, _ := keyWindowEnd(vendor, c.keyFirstSentAt)
		c.resendBefore = &end
	}
	return a, nil
}

// takeoverMargin is added to an attempt's start plus job timeout before another job
// treats the attempt as over.
const takeoverMargin = time.Second

// toReconciler hands an op the claiming job may not send to the reconciler: unknown,
// with an event saying why, and the job completed, all in tx.
func (d *Dispatcher) toReconciler(ctx context.Context, tx pgx.Tx, job *river.Job[Args], op *opRow, kind string, detail map[string]any) (*opstate.Applied, error) {
	a, err := d.deps.Ops.Apply(ctx, tx, opstate.Change{OpID: op.ID, From: op.Status, To: protocol.StatusUnknown, By: opstate.Worker,
		Kind: kind, Detail: detail})
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, fmt.Errorf("mark unknown: op is no longer %s", op.Status)
	}
	if err := d.deps.HandOverTx(ctx, tx); err != nil {
		return nil, fmt.Errorf("hand over: %w", err)
	}
	_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
	return a, err
}

// claimPending is the common case of a claim in one autocommitted statement: a pending
// op becomes dispatching with a fresh token and an attempt row. It returns nil, nil when
// the op is not pending (the locking path then decides).
func (d *Dispatcher) claimPending(ctx context.Context, job *river.Job[Args]) (*claim, error) {
	op := &opRow{}
	c := &claim{op: op}
	a, err := d.deps.Ops.ClaimPending(ctx, job.Args.OpID, job.ID, job.Attempt, d.cfg.ClientID, func(row pgx.Row) (opstate.Ident, error) {
		if err := row.Scan(append(op.scanDest(), &c.token, &c.sealedArgs, &c.keyFirstSentAt, &c.resendBefore, &c.definition)...); err != nil {
			return opstate.Ident{}, err
		}
		op.fromScan()
		return op.ident(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("op %s: %w", job.Args.OpID, err)
	}
	if a == nil {
		return nil, nil
	}
	c.attempt, c.startedAt = op.Attempts, *op.DispatchStartedAt
	return c, nil
}

func (d *Dispatcher) opLogger(op *opRow) *slog.Logger {
	return d.deps.Logger.With(op.ident().IdentityAttrs()...)
}

type recordParams struct {
	status    protocol.Status
	result    json.RawMessage
	errJSON   json.RawMessage
	vendorRef string
	outcome   string
	errText   string
	staleKey  bool
	// resendBefore, for a pending op whose request may have been carried out, is
	// until when it may be resent under the same key (nil: any time).
	resendBefore *time.Time
	// keepJob leaves the River job running so that the returned error retries it.
	keepJob bool
	// snoozes, with keepJob, says that the run snoozes its job after the record
	// (Retry-After) instead of returning an error: River then runs the job again at
	// the same attempt number.
	snoozes bool
}

// heardAttempt is the job attempt a record stores as heard (migration 016). A run that
// snoozes its job after the record is followed by another run at the same attempt
// number (River's snooze keeps it): that next run is the one heard attempt + 1 names,
// so that, should it call the vendor and die unheard, the run after it (attempt + 1) is
// not clean.
func heardAttempt(attempt int, p recordParams) int {
	if p.keepJob && p.snoozes {
		return attempt - 1
	}
	return attempt
}

// record writes the vendor's answer where the attempt token still matches and completes
// the job in the same transaction.
func (d *Dispatcher) record(ctx context.Context, job *river.Job[Args], c *claim, log *slog.Logger, p recordParams) error {
	op := c.op
	var redactedArgs json.RawMessage
	result := p.result
	// Redact once the op is terminal (a needs_review op may still be resent).
	if p.status.Terminal() {
		if tool, ok := d.deps.Tools.Lookup(op.Tool); ok {
			if tool.Redact != nil && !c.sealed {
				redactedArgs = tool.Redact(op.Args)
			}
			if tool.RedactResult != nil && result != nil {
				result = tool.RedactResult(result)
			}
		}
	}
	var nextCheck *time.Time
	if p.status == protocol.StatusUnknown {
		t := time.Now()
		nextCheck = &t
	}
	id := op.ident()
	id.Attempts, id.VendorRef = c.attempt, p.vendorRef
	r := opstate.Record{Ident: id, Token: c.token, To: p.status, Result: result, Error: p.errJSON, StaleKey: p.staleKey,
		RedactedArgs: redactedArgs, NextCheck: nextCheck, Outcome: p.outcome, ErrText: p.errText, ResendBefore: p.resendBefore,
		JobID: job.ID, JobAttempt: job.Attempt, HeardAttempt: heardAttempt(job.Attempt, p), EndsJob: !p.keepJob}
	write := func(q opstate.Querier, beforeJobComplete bool) (*opstate.Applied, error) {
		if c.clean {
			return d.deps.Ops.RecordClean(ctx, q, r, c.heard, beforeJobComplete)
		}
		return d.deps.Ops.RecordAndFinish(ctx, q, r, beforeJobComplete)
	}
	var applied *opstate.Applied
	var err error
	if p.keepJob || d.cfg.BatchedCompletion {
		// One statement: either the job stays running and the returned error retries
		// it, or River's completer finishes it once this run returns.
		applied, err = write(d.deps.Pool, false)
	} else {
		err = pgx.BeginFunc(ctx, d.deps.Pool, func(tx pgx.Tx) error {
			var err error
			if applied, err = write(tx, true); err != nil || applied == nil {
				// A fenced run must not complete the job: the job row may now belong to
				// the run that owns the op, which may still need it.
				return err
			}
			_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("op %s: %w", op.ID, err)
	}
	if applied == nil && c.clean {
		// The run's job was rescued (it ran past RescueStuckJobsAfter) or another run
		// recorded first. Its answer is lost: an error (not a snooze, which would keep
		// the attempt number) makes sure the job's next run is not clean, so that it
		// treats the op as possibly sent.
		log.Warn("result not recorded: the run was fenced (its job is no longer this run, or another run recorded first)",
			slog.String("outcome", p.outcome), slog.String("vendor_ref", p.vendorRef))
		return fmt.Errorf("op %s: result of job %d attempt %d not recorded: fenced", op.ID, job.ID, job.Attempt)
	}
	if applied == nil {
		log.Warn("result not recorded: another attempt owns the op (fenced by attempt token)",
			slog.String("outcome", p.outcome), slog.String("vendor_ref", p.vendorRef))
		// Snoozing (rather than completing) guarantees one more run of the job, which
		// re-reads the op and completes the job only when nothing is left to do.
		return river.JobSnooze(fencedRecheck)
	}
	applied.Report()
	return nil
}

// claimCommit reports whether this run commits its claim before the vendor call: always
// with Config.ClaimCommit, and while a process of an older release may be live.
func (d *Dispatcher) claimCommit() bool {
	return d.cfg.ClaimCommit || (d.cfg.MixedVersions != nil && d.cfg.MixedVersions())
}
