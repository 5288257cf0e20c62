package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

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

// claimCommit reports whether this run commits its claim before the vendor call: always
// with Config.ClaimCommit, and while a process of an older release may be live.
func (d *Dispatcher) claimCommit() bool {
	return d.cfg.ClaimCommit || (d.cfg.MixedVersions != nil && d.cfg.MixedVersions())
}
