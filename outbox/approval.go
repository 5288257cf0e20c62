package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/internal/storable"
	"github.com/oncebox/oncebox/protocol"
)

// DefaultApprovalExpiry is how long an op waits for a decision before it is rejected
// with the reason "approval expired", unless Config.ApprovalExpiry says otherwise.
const DefaultApprovalExpiry = 72 * time.Hour

var (
	// ErrPolicyChanged is returned for an approval of an op whose approval policy changed
	// since it started waiting: the approval was bound to the old policy. The op keeps
	// waiting; it can still be rejected, or left to expire.
	ErrPolicyChanged = errors.New("the approval policy of this op changed since it started waiting")
	// ErrFingerprintMismatch is returned when a decision names a fingerprint that is not
	// the op's: the person decided about another call than the one stored.
	ErrFingerprintMismatch = errors.New("the decision names another fingerprint than the op's")
)

// Decision is a person's approval or rejection of one op.
type Decision struct {
	TenantID int64
	Key      string
	// Approve approves; otherwise the decision rejects.
	Approve bool
	// Actor names who decides, for the op's history. Required.
	Actor string
	// Voter identifies the approver for four-eyes rules, which need distinct ones (such
	// as "token:12"). Defaults to Actor.
	Voter string
	// TokenID and Role are recorded with the decision (0 and "" from the CLI).
	TokenID int64
	Role    string
	Reason  string
	// Fingerprint, when set, must be the op's (as shown to the approver): a decision
	// is about exactly one call.
	Fingerprint string
}

// DecisionResult is what a decision did.
type DecisionResult struct {
	Op *Op
	// Changed is false when the same decision had already been taken (by this voter, for
	// an approval still short of its approvers).
	Changed bool
	// Approvals is how many distinct approvals the op has, of Needed.
	Approvals, Needed int
}

// approvalRow is an op's row of oncebox_approval.
type approvalRow struct {
	policyVersion string
	fingerprint   []byte
	needed        int
	why           string
	requestedAt   time.Time
	expiresAt     time.Time
	expired       bool
	decision      *string
}

// requestApprovalTx records why a new op waits, the policy version and fingerprint its
// approval is bound to, and until when it may wait.
func (ob *Outbox) requestApprovalTx(ctx context.Context, tx pgx.Tx, op *Op, h *Hold, tokenID int64) error {
	var token any
	if tokenID != 0 {
		token = tokenID
	}
	if _, err := tx.Exec(ctx, sqlRequestApproval, op.ID, op.TenantID, h.PolicyVersion, op.Fingerprint[:], h.approvers(), h.Why,
		ob.cfg.ApprovalExpiry.Seconds(), token, h.Budget); err != nil {
		return fmt.Errorf("outbox: record approval request: %w", err)
	}
	return nil
}

// Approve releases an op that awaits approval: it becomes pending and its dispatch job
// is inserted in the same transaction. actor and reason are recorded in its history.
// It is Decide with the actor as the voter.
func (ob *Outbox) Approve(ctx context.Context, tenantID int64, key, actor, reason string) (*Op, error) {
	res, err := ob.Decide(ctx, Decision{TenantID: tenantID, Key: key, Approve: true, Actor: actor, Reason: reason})
	if err != nil {
		return nil, err
	}
	return res.Op, nil
}

// Reject refuses an op that awaits approval; it is never dispatched.
func (ob *Outbox) Reject(ctx context.Context, tenantID int64, key, actor, reason string) (*Op, error) {
	res, err := ob.Decide(ctx, Decision{TenantID: tenantID, Key: key, Actor: actor, Reason: reason})
	if err != nil {
		return nil, err
	}
	return res.Op, nil
}

// Decide records a person's decision about an op that awaits approval.
//
// Decisions are idempotent: the same decision again (an approval of an approved op, a
// rejection of a rejected one, a voter approving twice) changes nothing and is no
// error. The opposite decision on a decided op, any decision on an op that never awaited
// approval or whose wait expired, is ErrWrongState. An approval is bound to the policy
// version the op started waiting under (the gate's CheckApproval: ErrPolicyChanged
// otherwise; the op keeps waiting) and, when d.Fingerprint is set, to the op's
// fingerprint (ErrFingerprintMismatch). A four-eyes rule dispatches the op at its
// second distinct approver. An op whose wait ran out is rejected as expired first.
// Status changes go through the op state machine (internal/opstate).
func (ob *Outbox) Decide(ctx context.Context, d Decision) (*DecisionResult, error) {
	k, err := checkDecision(&d)
	if err != nil {
		return nil, err
	}
	dec := &deciding{d: d, res: &DecisionResult{}}
	err = pgx.BeginFunc(ctx, ob.pool, func(tx pgx.Tx) error { return ob.decideTx(ctx, tx, k, dec) })
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrWrongState) || errors.Is(err, ErrPolicyChanged) ||
			errors.Is(err, ErrFingerprintMismatch) {
			return nil, err
		}
		return nil, fmt.Errorf("outbox: decide op: %w", err)
	}
	dec.applied.Report()
	if dec.expired {
		return nil, fmt.Errorf("%w: op is %s: its approval expired before this decision", ErrWrongState, protocol.StatusRejected)
	}
	res := dec.res
	if dec.applied != nil {
		// The row as the transition left it (updated_at, error, redacted args).
		if op, err := ob.getByID(ctx, d.TenantID, res.Op.ID); err == nil {
			res.Op = op
		}
	}
	return res, nil
}

// checkDecision checks a decision before anything is read, defaults its voter, and
// returns its normalized key.
func checkDecision(d *Decision) (string, error) {
	k, err := protocol.NormalizeKey(d.Key)
	if err != nil {
		return "", err
	}
	for _, f := range []struct{ name, value string }{{"reason", d.Reason}, {"actor", d.Actor}, {"fingerprint", d.Fingerprint}} {
		if err := storable.CheckText(f.name, f.value); err != nil {
			return "", err
		}
	}
	if d.Actor == "" {
		return "", errors.New("outbox: Decision.Actor is required: name who decides")
	}
	if d.Voter == "" {
		d.Voter = d.Actor
	}
	return k, nil
}

// deciding is one decision under way.
type deciding struct {
	d   Decision
	res *DecisionResult
	// applied is the transition the decision made (report it once committed).
	applied *opstate.Applied
	// expired: the wait had run out, and the op was rejected as expired instead.
	expired bool
}

// decideTx locks the op under key k and its approval, and applies the decision.
func (ob *Outbox) decideTx(ctx context.Context, tx pgx.Tx, k string, dec *deciding) error {
	d := dec.d
	op := &Op{}
	var sealed bool
	if err := tx.QueryRow(ctx, sqlOpByKeyForUpdate, d.TenantID, k).Scan(append(op.scanDest(), &sealed)...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		return err
	}
	op.fromScan()
	dec.res.Op = op
	a, err := readApproval(ctx, tx, op.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		// Every release records an op's approval row with the op that waits.
		return fmt.Errorf("%w: op is %s and never awaited approval", ErrWrongState, op.Status)
	} else if err != nil {
		return err
	}
	dec.res.Needed = a.needed
	if a.decision != nil {
		return decidedAlready(*a.decision, d.Approve, op)
	}
	if op.Status != protocol.StatusAwaitingApproval {
		return fmt.Errorf("%w: op is %s", ErrWrongState, op.Status)
	}
	if a.expired {
		dec.applied, err = ob.expireTx(ctx, tx, op, sealed, a)
		dec.expired = dec.applied != nil
		return err
	}
	if d.Fingerprint != "" && d.Fingerprint != op.Fingerprint.String() {
		return fmt.Errorf("%w: the op's is %s", ErrFingerprintMismatch, op.Fingerprint)
	}
	detail := map[string]any{"reason": d.Reason, "policy_version": a.policyVersion, "fingerprint": op.Fingerprint.String()}
	if d.TokenID != 0 {
		detail["token_id"] = d.TokenID
	}
	if d.Role != "" {
		detail["role"] = d.Role
	}
	if !d.Approve {
		rej, _ := json.Marshal(map[string]string{"class": "rejected", "code": "rejected",
			"message": "rejected by " + d.Actor + ": " + d.Reason})
		dec.applied, err = ob.settleRejected(ctx, tx, op, sealed, opstate.Person, d.Actor, "rejected", detail, rej, "rejected")
		dec.res.Changed = dec.applied != nil
		return err
	}
	return ob.approveTx(ctx, tx, op, a, detail, dec)
}

// approveTx counts a person's approval of a waiting op, checked by the gate against the
// policy it waits under, and releases the op at its last needed approver.
func (ob *Outbox) approveTx(ctx context.Context, tx pgx.Tx, op *Op, a *approvalRow, detail map[string]any, dec *deciding) error {
	d, res := dec.d, dec.res
	if tool, ok := ob.cfg.Tools.Lookup(op.Tool); ok {
		if err := ob.cfg.Gate.CheckApproval(ctx, tx, op, tool, a.policyVersion); err != nil {
			return err
		}
	}
	tag, err := tx.Exec(ctx, sqlApprovalVote, op.ID, d.Voter)
	if err != nil {
		return fmt.Errorf("record approval: %w", err)
	}
	if err := tx.QueryRow(ctx, sqlApprovalVotes, op.ID).Scan(&res.Approvals); err != nil {
		return fmt.Errorf("count approvals: %w", err)
	}
	detail["approvals"], detail["approvers_needed"] = res.Approvals, a.needed
	if tag.RowsAffected() == 0 {
		return nil // this voter approved already
	}
	res.Changed = true
	if res.Approvals < a.needed {
		// The op stays awaiting approval: the transition records the event only.
		dec.applied, err = ob.ops.Apply(ctx, tx, opstate.Change{OpID: op.ID, From: protocol.StatusAwaitingApproval,
			To: protocol.StatusAwaitingApproval, By: opstate.Person, Action: opstate.Approve, Actor: d.Actor, Kind: "approval_given", Detail: detail,
			Message: "approval recorded; more approvers needed"})
		if err != nil {
			return fmt.Errorf("record approval: %w", err)
		}
		return nil
	}
	if _, err := tx.Exec(ctx, sqlDecideApproval, op.ID, "approved"); err != nil {
		return fmt.Errorf("record approval decision: %w", err)
	}
	dec.applied, err = ob.ops.Apply(ctx, tx, opstate.Change{OpID: op.ID, From: protocol.StatusAwaitingApproval, To: protocol.StatusPending,
		By: opstate.Person, Action: opstate.Approve, Actor: d.Actor, Kind: "approved", Detail: detail})
	if err != nil {
		return err
	}
	if dec.applied == nil {
		return fmt.Errorf("%w: op is no longer %s", ErrWrongState, protocol.StatusAwaitingApproval)
	}
	op.Status = protocol.StatusPending
	return nil
}

// decidedAlready answers a decision about an op whose approval was decided: the same
// decision is a no-op, the opposite (or any after an expiry) is ErrWrongState.
func decidedAlready(decision string, approve bool, op *Op) error {
	if (decision == "approved" && approve) || (decision == "rejected" && !approve) {
		return nil
	}
	if decision == "expired" {
		return fmt.Errorf("%w: op is %s: its approval expired", ErrWrongState, op.Status)
	}
	return fmt.Errorf("%w: op is %s: it was %s already", ErrWrongState, op.Status, decision)
}

func readApproval(ctx context.Context, tx pgx.Tx, opID string) (*approvalRow, error) {
	a := &approvalRow{}
	err := tx.QueryRow(ctx, sqlApprovalForUpdate, opID).Scan(&a.policyVersion, &a.fingerprint, &a.needed, &a.why,
		&a.requestedAt, &a.expiresAt, &a.expired, &a.decision)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// settleRejected makes a locked, waiting op rejected through the state machine, with
// errJSON as its error; args stored in full (no seal key) are redacted as the worker
// would (the transition drops a sealed copy). decision is recorded on its approval row.
func (ob *Outbox) settleRejected(ctx context.Context, tx pgx.Tx, op *Op, sealed bool, by opstate.Actor, actor, kind string,
	detail any, errJSON []byte, decision string) (*opstate.Applied, error) {
	change := opstate.Change{OpID: op.ID, From: protocol.StatusAwaitingApproval, To: protocol.StatusRejected, By: by, Actor: actor,
		Action: rejectAction(by),
		Kind:   kind, Detail: detail, Error: errJSON}
	if tool, ok := ob.cfg.Tools.Lookup(op.Tool); ok && tool.Redact != nil && !sealed {
		change.RedactedArgs = tool.Redact(op.Args)
	}
	applied, err := ob.ops.Apply(ctx, tx, change)
	if err != nil || applied == nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, sqlDecideApproval, op.ID, decision); err != nil {
		return nil, fmt.Errorf("record approval decision: %w", err)
	}
	op.Status, op.Error = protocol.StatusRejected, errJSON
	if change.RedactedArgs != nil {
		op.Args = change.RedactedArgs
	}
	return applied, nil
}

// rejectAction is the action of a rejection by by: a person rejects; the expiry has none.
func rejectAction(by opstate.Actor) opstate.Action {
	if by == opstate.Person {
		return opstate.Reject
	}
	return ""
}

// expireTx rejects a locked op whose wait for approval ran out.
func (ob *Outbox) expireTx(ctx context.Context, tx pgx.Tx, op *Op, sealed bool, a *approvalRow) (*opstate.Applied, error) {
	msg := "approval expired: nobody decided between " + a.requestedAt.UTC().Format(time.RFC3339) +
		" and " + a.expiresAt.UTC().Format(time.RFC3339)
	errJSON, _ := json.Marshal(map[string]string{"class": "rejected", "code": "approval_expired", "message": msg})
	return ob.settleRejected(ctx, tx, op, sealed, opstate.Expiry, "", "approval_expired",
		map[string]any{"reason": "approval expired", "expired_at": a.expiresAt}, errJSON, "expired")
}

// expireIfDue rejects op when it awaits approval past its expiry, and returns it as it
// then stands. Reads (Get, a replayed enqueue) call it, so that an agent sees the expiry
// on its next read even before the periodic sweep.
func (ob *Outbox) expireIfDue(ctx context.Context, op *Op) (*Op, error) {
	if op.Status != protocol.StatusAwaitingApproval {
		return op, nil
	}
	var (
		out     *Op
		applied *opstate.Applied
	)
	err := pgx.BeginFunc(ctx, ob.pool, func(tx pgx.Tx) error {
		var err error
		out, applied, err = ob.expireIfDueTx(ctx, tx, op.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: expire approval: %w", err)
	}
	applied.Report()
	if out == nil {
		return op, nil
	}
	return out, nil
}

// expireIfDueTx locks the op with id and rejects it when its wait has run out. It
// returns the op as it stands (nil when gone) and the transition, when it expired now
// (report it once committed).
func (ob *Outbox) expireIfDueTx(ctx context.Context, tx pgx.Tx, id string) (*Op, *opstate.Applied, error) {
	op := &Op{}
	var sealed bool
	if err := tx.QueryRow(ctx, sqlOpByIDForDecision, id).Scan(append(op.scanDest(), &sealed)...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	op.fromScan()
	if op.Status != protocol.StatusAwaitingApproval {
		return op, nil, nil
	}
	a, err := readApproval(ctx, tx, op.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return op, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if a.decision != nil || !a.expired {
		return op, nil, nil
	}
	applied, err := ob.expireTx(ctx, tx, op, sealed, a)
	if err != nil {
		return nil, nil, err
	}
	if applied != nil {
		op.UpdatedAt = time.Now()
	}
	return op, applied, nil
}

// ExpireApprovals rejects, in batches, every op whose wait for approval ran out, and
// returns how many. The TTL purge job runs it.
func (ob *Outbox) ExpireApprovals(ctx context.Context) (int, error) {
	total := 0
	for {
		rows, err := ob.pool.Query(ctx, sqlDueApprovals, 100)
		if err != nil {
			return total, fmt.Errorf("outbox: find expired approvals: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return total, fmt.Errorf("outbox: find expired approvals: %w", err)
		}
		n := 0
		for _, id := range ids {
			var applied *opstate.Applied
			err := pgx.BeginFunc(ctx, ob.pool, func(tx pgx.Tx) error {
				var err error
				_, applied, err = ob.expireIfDueTx(ctx, tx, id)
				return err
			})
			if err != nil {
				return total, fmt.Errorf("outbox: expire approval of op %s: %w", id, err)
			}
			if applied != nil {
				applied.Report()
				n++
			}
		}
		total += n
		if len(ids) < 100 || n == 0 {
			return total, nil
		}
	}
}

// Waiting is an op that awaits a person's decision, for GET /v1/approvals.
type Waiting struct {
	Op *Op
	// Why says in one sentence why the op waits.
	Why           string
	PolicyVersion string
	// Approvals is how many distinct approvals it has, of ApproversNeeded.
	Approvals, ApproversNeeded int
	RequestedAt, ExpiresAt     time.Time
	// RequestedByToken is the id of the API token that asked (0: none recorded).
	RequestedByToken int64
	// Amount and Currency are the op's, when its tool has an amount (HasAmount); a
	// refund's currency is its payment's, when oncebox made that payment.
	Amount    int64
	Currency  string
	HasAmount bool
	// Payment is the payment a refund gives money back from (Tool.RefundOf); nil for
	// an op that refunds nothing.
	Payment *Payment
}

// ListWaiting returns the tenant's ops that await approval, oldest first, at most
// limit of them, with their arguments in redacted form (tools with Redact). An op whose
// wait ran out is left out (the next read or sweep rejects it).
func (ob *Outbox) ListWaiting(ctx context.Context, tenantID int64, limit int) ([]Waiting, error) {
	rows, err := ob.pool.Query(ctx, sqlListWaiting, tenantID, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: list approvals: %w", err)
	}
	defer rows.Close()
	var out []Waiting
	for rows.Next() {
		w := Waiting{Op: &Op{}}
		var sealed bool
		dest := append(w.Op.scanDest(), &sealed, &w.Why, &w.PolicyVersion, &w.ApproversNeeded, &w.RequestedAt, &w.ExpiresAt,
			&w.Approvals, &w.RequestedByToken)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("outbox: list approvals: %w", err)
		}
		w.Op.fromScan()
		if tool, ok := ob.cfg.Tools.Lookup(w.Op.Tool); ok {
			if tool.Amount != nil {
				w.Amount, w.Currency, w.HasAmount = tool.Amount(w.Op.Args)
			}
			// Stored args are the redacted form when sealed; redact full ones for display.
			if tool.Redact != nil && !sealed {
				w.Op.Args = tool.Redact(w.Op.Args)
			}
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: list approvals: %w", err)
	}
	rows.Close()
	for i := range out {
		if err := ob.addPayment(ctx, tenantID, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// addPayment sets the payment a waiting refund gives money back from, and its
// currency as the refund's.
func (ob *Outbox) addPayment(ctx context.Context, tenantID int64, w *Waiting) error {
	tool, ok := ob.cfg.Tools.Lookup(w.Op.Tool)
	if !ok || tool.RefundOf == "" {
		return nil
	}
	p, err := paymentOf(ctx, ob.pool, ob.cfg.Tools, tenantID, tool, w.Op.Args)
	if err != nil {
		return err
	}
	w.Payment = p
	if w.Currency == "" {
		w.Currency = p.Currency
	}
	return nil
}

// WaitReason returns why the tenant's op waits (or waited) for approval, or "" when it
// never did.
func (ob *Outbox) WaitReason(ctx context.Context, tenantID int64, opID string) (string, error) {
	var why string
	err := ob.pool.QueryRow(ctx, sqlWaitReason, tenantID, opID).Scan(&why)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("outbox: read approval reason: %w", err)
	}
	return why, nil
}

// VoterForToken returns the Decision.Voter of an API token, so that four-eyes rules
// count distinct tokens.
func VoterForToken(id int64) string { return "token:" + strconv.FormatInt(id, 10) }
