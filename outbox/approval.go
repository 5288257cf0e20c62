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

// VoterForToken returns the Decision.Voter of an API token, so that four-eyes rules
// count distinct tokens.
func VoterForToken(id int64) string { return "token:" + strconv.FormatInt(id, 10) }
