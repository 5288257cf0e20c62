package dispatch

import (
	"context"
	"encoding/json"
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
