package api

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendorapi"
)

// postOp is POST /v1/ops: record a tool call under the Idempotency-Key header.
func (s *Server) postOp(w http.ResponseWriter, r *http.Request, t *tenant.Principal) {
	key, keyProblem := headerKey(r)
	if keyProblem != nil && s.cfg.Reads == nil {
		writeProblem(w, keyProblem)
		return
	}
	wait, p := parseWait(r, s.cfg.MaxWait)
	if p != nil {
		writeProblem(w, p)
		return
	}
	var req opRequest
	if p := readJSON(w, r, s.cfg.MaxBodyBytes, &req); p != nil {
		writeProblem(w, p)
		return
	}
	if s.cfg.Reads != nil && s.cfg.Reads.IsReadFor(t.ID, req.Tool) {
		// A read tool makes no op: no key is needed, and none is used.
		s.callRead(w, r, req)
		return
	}
	if keyProblem != nil {
		writeProblem(w, keyProblem)
		return
	}
	recorderOf(r).key = key
	if wait > 0 {
		done, p := s.startWait(w, t.ID)
		if p != nil {
			writeProblem(w, p)
			return
		}
		defer done()
	}
	if p := conversationHeader(r, &req); p != nil {
		writeProblem(w, p)
		return
	}
	// The call is validated and fingerprinted once, here, and recorded as prepared.
	call, err := s.ob.Prepare(outbox.EnqueueParams{
		TenantID:       t.ID,
		Key:            key,
		Tool:           req.Tool,
		Args:           req.Args,
		ConversationID: req.ConversationID,
		ToolCallID:     req.ToolCallID,
		TokenID:        t.TokenID,
	})
	var res *outbox.EnqueueResult
	if err == nil {
		res, err = s.ob.EnqueuePrepared(r.Context(), call)
	}
	if err != nil {
		s.opError(w, r, err)
		return
	}
	op := res.Op
	recorderOf(r).opID = op.ID
	if wait > 0 {
		if op, err = s.wait(r.Context(), t.ID, key, wait); err != nil {
			s.opError(w, r, fmt.Errorf("wait for op: %w", err))
			return
		}
	}
	body, err := renderOp(op, nil, s.whyOf(r, t.ID, op, res.Why))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	w.Header().Set("Location", opPath(op.Key))
	status := http.StatusAccepted
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		status = http.StatusOK
	}
	writeOp(w, status, body)
}

// getOp is GET /v1/ops/{key}: the tenant's op, optionally after waiting for it to
// settle and with its history.
func (s *Server) getOp(w http.ResponseWriter, r *http.Request, t *tenant.Principal) {
	key, p := pathKey(r)
	if p != nil {
		writeProblem(w, p)
		return
	}
	wait, p := parseWait(r, s.cfg.MaxWait)
	if p != nil {
		writeProblem(w, p)
		return
	}
	var op *outbox.Op
	var err error
	if wait > 0 {
		done, p := s.startWait(w, t.ID)
		if p != nil {
			writeProblem(w, p)
			return
		}
		defer done()
		op, err = s.wait(r.Context(), t.ID, key, wait)
	} else {
		op, err = s.ob.Get(r.Context(), t.ID, key)
	}
	if err != nil {
		s.opError(w, r, err)
		return
	}
	recorderOf(r).opID = op.ID
	var h *outbox.History
	if withHistory, _ := strconv.ParseBool(r.URL.Query().Get("history")); withHistory {
		if h, err = s.ob.History(r.Context(), t.ID, op.ID); err != nil {
			s.internal(w, r, err)
			return
		}
	}
	body, err := renderOp(op, h, s.whyOf(r, t.ID, op, ""))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeOp(w, http.StatusOK, body)
}

// approveOp is POST /v1/ops/{key}/approve.
func (s *Server) approveOp(w http.ResponseWriter, r *http.Request, t *tenant.Principal) {
	s.decide(w, r, t, true)
}

// rejectOp is POST /v1/ops/{key}/reject.
func (s *Server) rejectOp(w http.ResponseWriter, r *http.Request, t *tenant.Principal) {
	s.decide(w, r, t, false)
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request, t *tenant.Principal, approve bool) {
	key, p := pathKey(r)
	if p != nil {
		writeProblem(w, p)
		return
	}
	body, p := readBody(w, r, s.cfg.MaxBodyBytes)
	if p != nil {
		writeProblem(w, p)
		return
	}
	var req decisionRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if p := checkJSONType(r); p != nil {
			writeProblem(w, p)
			return
		}
		if p := decodeStrict(body, &req); p != nil {
			writeProblem(w, p)
			return
		}
	}
	res, err := s.ob.Decide(r.Context(), outbox.Decision{TenantID: t.ID, Key: key, Approve: approve, Actor: t.Actor(),
		Voter: t.Voter(), TokenID: t.TokenID, Role: string(t.Role), Reason: req.Reason,
		Fingerprint: req.Fingerprint})
	var conflict *protocol.Problem
	switch {
	case errors.Is(err, outbox.ErrWrongState):
		conflict = protocol.NewProblem(http.StatusConflict, protocol.ProblemWrongState, "Only an op that awaits approval can be approved or rejected, and a decided op only the same way again.")
	case errors.Is(err, outbox.ErrPolicyChanged):
		conflict = protocol.NewProblem(http.StatusConflict, protocol.ProblemPolicyChanged,
			"The approval policy of this op's tool changed since it started waiting, so this approval is refused; the op keeps waiting (it can be rejected, or left to expire).")
	case errors.Is(err, outbox.ErrFingerprintMismatch):
		conflict = protocol.NewProblem(http.StatusConflict, protocol.ProblemFingerprintMismatch,
			"The fingerprint in the decision is not the op's: the decision is about another call than the one stored under this key.")
	}
	if conflict != nil {
		if cur, gerr := s.ob.Get(r.Context(), t.ID, key); gerr == nil {
			conflict.OpStatus = string(cur.Status)
			if errors.Is(err, outbox.ErrWrongState) {
				conflict.Detail = fmt.Sprintf("Only an op that awaits approval can be approved or rejected, and a decided op only the same way again; this one is %s.", cur.Status)
			}
		}
		writeProblem(w, conflict)
		return
	}
	if err != nil {
		s.opError(w, r, err)
		return
	}
	recorderOf(r).opID = res.Op.ID
	out, err := renderOp(res.Op, nil, s.whyOf(r, t.ID, res.Op, ""))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeOp(w, http.StatusOK, out)
}

// whyOf is the "why" member of op: known (the sentence of the enqueue that made it
// wait), else the one recorded with its approval, while op awaits approval; "" when it
// does not, or when the sentence cannot be read (the answer goes out without it).
func (s *Server) whyOf(r *http.Request, tenantID int64, op *outbox.Op, known string) string {
	if op.Status != protocol.StatusAwaitingApproval {
		return ""
	}
	if known != "" {
		return known
	}
	why, err := s.ob.WaitReason(r.Context(), tenantID, op.ID)
	if err != nil {
		s.logger.Warn("read why an op waits", slog.String("op_id", op.ID), slog.Any("error", err))
		return ""
	}
	return why
}

// opError answers an error of the outbox with its problem.
func (s *Server) opError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		keyErr      *protocol.KeyError
		conflictErr *outbox.KeyConflictError
		toolErr     *outbox.UnknownToolError
		argsErr     *vendorapi.ValidationError
		budgetErr   *governance.BudgetExceededError
		notOwned    *outbox.NotOwnedError
		unavailable *outbox.ObjectUnavailableError
	)
	switch {
	case errors.As(err, &keyErr):
		p := protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidKey, "The idempotency key "+keyErr.Detail+".")
		p.Rule = keyErr.Rule
		writeProblem(w, p)
	case errors.As(err, &conflictErr):
		p := protocol.NewProblem(http.StatusUnprocessableEntity, protocol.ProblemKeyConflict,
			"This Idempotency-Key was already used with a different tool call; use a new key for a new side effect, or resend the original payload to read its outcome.")
		p.StoredFingerprint, p.GivenFingerprint = conflictErr.Stored.String(), conflictErr.Given.String()
		writeProblem(w, p)
	case errors.As(err, &toolErr):
		p := protocol.NewProblem(http.StatusBadRequest, protocol.ProblemUnknownTool,
			fmt.Sprintf("The tool %q does not exist; use one of the known tools.", toolErr.Name))
		p.Field, p.KnownTools = "tool", toolErr.Known
		writeProblem(w, p)
	case errors.As(err, &argsErr):
		writeProblem(w, validationProblem(argsErr))
	case errors.As(err, &notOwned):
		p := protocol.NewProblem(http.StatusNotFound, protocol.ProblemNotFound,
			notOwned.Error()+": no op of this tenant made it and the tenant has not adopted it (oncebox tenant adopt). Nothing was recorded or sent.")
		p.Field = "args." + notOwned.Arg
		writeProblem(w, p)
	case errors.As(err, &unavailable):
		w.Header().Set("Retry-After", strconv.Itoa(objectRetryAfter))
		p := protocol.NewProblem(http.StatusServiceUnavailable, protocol.ProblemVendorUnavailable,
			fmt.Sprintf("The vendor could not be asked whether %s %s is one of this tenant's objects. Nothing was recorded or sent; retry with the same Idempotency-Key after Retry-After.",
				unavailable.Arg, unavailable.ID))
		p.Field = "args." + unavailable.Arg
		writeProblem(w, p)
	case errors.Is(err, outbox.ErrNotFound):
		writeProblem(w, protocol.NewProblem(http.StatusNotFound, protocol.ProblemNotFound, "No op is stored under this idempotency key for your tenant."))
	case errors.Is(err, outbox.ErrUnknownTenant):
		// The token was checked, and its tenant deleted since.
		writeProblem(w, protocol.NewProblem(http.StatusUnauthorized, protocol.ProblemUnauthorized, "Your token's tenant no longer exists. Nothing was recorded."))
	case errors.As(err, &budgetErr):
		secs := int64(math.Ceil(budgetErr.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		p := protocol.NewProblem(http.StatusTooManyRequests, protocol.ProblemBudgetExceeded, budgetErr.Sentence+" Nothing was recorded; the same call may be sent again once the window ends.")
		p.Budget = budgetErr.Budget
		writeProblem(w, p)
	default:
		s.internal(w, r, err)
	}
}

// objectRetryAfter is the Retry-After, in seconds, of a call refused because the vendor
// could not be asked whose its object is.
const objectRetryAfter = 5

// opPath is the URL path of the op stored under key.
func opPath(key string) string { return "/v1/ops/" + url.PathEscape(key) }
