package opstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/protocol"
)

// The dispatch worker's transitions: claim, hand over to the reconciler, record.

// ClaimPending is the common case of a claim in one autocommitted statement: a pending
// op becomes dispatching with a fresh token and an attempt row of job jobID. scan reads
// the returned row (OpColumns, then the token, the sealed args, key_first_sent_at and
// resend_before) and returns the op's Ident. It returns nil, nil when the op is not
// pending, is pending past its resend_before, or the run (job jobID at job attempt
// jobAttempt) is not clean (CleanRunSQL): the locking path then decides. worker is the
// River client id of the claiming process, stored with the attempt (” for none).
func (m *Machine) ClaimPending(ctx context.Context, opID string, jobID int64, jobAttempt int, worker string, scan func(pgx.Row) (Ident, error)) (*Applied, error) {
	s := &step{from: []protocol.Status{protocol.StatusPending}, to: protocol.StatusDispatching, by: Worker}
	a, err := m.transition(ctx, m.cfg.Pool, s, func(bool) (bool, error) {
		id, err := scan(m.cfg.Pool.QueryRow(ctx, sqlClaimPending, opID, jobID, jobAttempt, worker))
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		s.ident = id
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	a.Report()
	return a, nil
}

// Claimed is what a claim on the locking path wrote.
type Claimed struct {
	Attempt        int
	Token          string
	VendorKey      string
	StartedAt      time.Time
	KeyFirstSentAt time.Time
	ResendBefore   *time.Time
}

// Claim commits an op locked in tx, in status from (pending, or dispatching whose
// worker died, inside the vendor's key window), as dispatching with a fresh attempt
// token, and inserts the attempt row of job jobID, claimed by the process whose River
// client id is worker (” for none). Report it after the commit.
func (m *Machine) Claim(ctx context.Context, tx pgx.Tx, from protocol.Status, id Ident, jobID int64, worker string) (*Claimed, *Applied, error) {
	c := &Claimed{}
	s := &step{from: []protocol.Status{from}, to: protocol.StatusDispatching, by: Worker, ident: id, silent: from == protocol.StatusDispatching}
	a, err := m.transition(ctx, tx, s, func(bool) (bool, error) {
		if err := tx.QueryRow(ctx, sqlClaim, id.ID, from).Scan(&c.Attempt, &c.Token, &c.VendorKey, &c.StartedAt,
			&c.KeyFirstSentAt, &c.ResendBefore); err != nil {
			return false, fmt.Errorf("claim op: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlInsertAttempt, id.ID, c.Attempt, c.Token, c.VendorKey, jobID, c.StartedAt, worker); err != nil {
			return false, fmt.Errorf("insert attempt: %w", err)
		}
		s.ident.Attempts = c.Attempt
		return true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return c, a, nil
}

// MarkUnheard, on the locking path, counts on a pending op locked in tx the earlier run
// that may have called the vendor without its answer being recorded (sqlMarkUnheard),
// and returns the op's key_first_sent_at (now at the latest its creation). ok is false
// when the op is no longer pending.
func (m *Machine) MarkUnheard(ctx context.Context, tx pgx.Tx, opID string, jobID int64) (keyFirstSentAt time.Time, ok bool, err error) {
	err = tx.QueryRow(ctx, sqlMarkUnheard, opID, jobID).Scan(&keyFirstSentAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("mark unheard run: %w", err)
	}
	return keyFirstSentAt, true, nil
}

// CloseLostAttempts closes the attempts of an op that job jobID found dispatching:
// their worker died (or timed out) without recording an answer.
func (m *Machine) CloseLostAttempts(ctx context.Context, tx pgx.Tx, opID string, jobID int64) error {
	if _, err := tx.Exec(ctx, sqlCloseLostAttempts, opID, jobID); err != nil {
		return fmt.Errorf("close lost attempts: %w", err)
	}
	return nil
}

// Record is a vendor's answer (or its absence) to one dispatch attempt.
type Record struct {
	// Ident names the op; Attempts is the attempt recorded, VendorRef the object.
	Ident Ident
	// Token is the attempt's token: the answer is written only while it still matches.
	Token string
	// To is the op's new status.
	To           protocol.Status
	Result       json.RawMessage
	Error        json.RawMessage
	StaleKey     bool
	RedactedArgs json.RawMessage
	// NextCheck is when the reconciler looks at an op recorded unknown.
	NextCheck *time.Time
	// Outcome and ErrText close the attempt row.
	Outcome string
	ErrText string
	// ResendBefore, for a pending op whose request may have been carried out, is until
	// when it may be resent under the same key (nil: any time).
	ResendBefore *time.Time
	// JobID and JobAttempt are the River run that got the answer (the clean record's
	// fence); JobID and HeardAttempt are stored as the op's heard run (migration 016).
	JobID        int64
	JobAttempt   int
	HeardAttempt int
	// EndsJob says that the run returns without error after this record, so that River
	// completes its job: a clean record that makes the op terminal then deletes the
	// job's row instead (see sqlRecordClean). A record in the transaction of River's
	// JobCompleteTx never does.
	EndsJob bool
}

// Heard is the run whose answer an op recorded last (heard_job_id, heard_job_attempt),
// as a clean run read it: nil when none.
type Heard struct {
	JobID   *int64
	Attempt *int
}

// RecordClean records r for a clean run, one that called its vendor without a claim
// commit (River's fetch was the claim): the op goes from pending to r.To, and its
// finished attempt row is inserted, in one statement on q (sqlRecordClean), only while
// the op is still pending, its heard run is still heard (as the run read it) and River's
// job row is still this run (r.JobID running at r.JobAttempt). It returns nil (and no
// error) when fenced. beforeJobComplete as in RecordAndFinish; report the result after
// the commit.
func (m *Machine) RecordClean(ctx context.Context, q Querier, r Record, heard Heard, beforeJobComplete bool) (*Applied, error) {
	sql := sqlRecordCleanAlone
	if beforeJobComplete {
		sql = sqlRecordCleanBeforeJobComplete
	}
	s := &step{from: []protocol.Status{protocol.StatusPending}, to: r.To, by: Worker, ident: r.Ident,
		attrs: []any{slog.String("outcome", r.Outcome)}, notifyAfterCommit: true}
	return m.transition(ctx, q, s, func(dropSealed bool) (bool, error) {
		var attempts int
		if err := q.QueryRow(ctx, sql, r.Ident.ID, r.To, nullJSON(r.Result), nullJSON(r.Error), r.Ident.VendorRef,
			r.StaleKey, nullJSON(r.RedactedArgs), r.NextCheck, r.Outcome, r.ErrText, r.ResendBefore, dropSealed,
			r.JobID, r.JobAttempt, heard.JobID, heard.Attempt, r.HeardAttempt, r.EndsJob && !beforeJobComplete,
		).Scan(&attempts); err != nil {
			return false, fmt.Errorf("record result: %w", err)
		}
		s.ident.Attempts = attempts
		return attempts > 0, nil
	})
}

// RecordAndFinish records r where the attempt token still matches and closes the
// attempt row, in one statement on q. With beforeJobComplete the statement also sets
// generic plans for the rest of q's transaction (River's JobCompleteTx follows). It
// returns nil (and no error) when the attempt was fenced (another attempt owns the op);
// report the result after the commit: Report also wakes the op's long polls, which the
// statement leaves to it (see notifyAfterCommit).
func (m *Machine) RecordAndFinish(ctx context.Context, q Querier, r Record, beforeJobComplete bool) (*Applied, error) {
	sql := sqlRecordAndFinish
	if beforeJobComplete {
		sql = sqlRecordAndFinishBeforeJobComplete
	}
	// The op is reported as leaving dispatching; it may have been moved to unknown
	// meanwhile, which the guard allows (a slow worker's answer still counts).
	s := &step{from: []protocol.Status{protocol.StatusDispatching, protocol.StatusUnknown}, to: r.To, by: Worker, ident: r.Ident,
		attrs: []any{slog.String("outcome", r.Outcome)}, notifyAfterCommit: true}
	return m.transition(ctx, q, s, func(dropSealed bool) (bool, error) {
		var recorded, finished bool
		if err := q.QueryRow(ctx, sql, r.Ident.ID, r.Token, r.To, nullJSON(r.Result), nullJSON(r.Error), r.Ident.VendorRef,
			r.StaleKey, nullJSON(r.RedactedArgs), r.NextCheck, r.Outcome, r.ErrText, r.ResendBefore, dropSealed,
			r.JobID, r.HeardAttempt,
		).Scan(&recorded, &finished); err != nil {
			return false, fmt.Errorf("record result: %w", err)
		}
		if !finished {
			return false, fmt.Errorf("record result: attempt %d (token %s) has no row", r.Ident.Attempts, r.Token)
		}
		return recorded, nil
	})
}
