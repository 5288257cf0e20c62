package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
)

// resolveOp is POST /v1/ops/{key}/resolve: a person settles an op in needs_review or
// unknown, as `oncebox review resolve` does.
func (s *Server) resolveOp(w http.ResponseWriter, r *http.Request, t *tenant.Principal) {
	key, p := pathKey(r)
	if p != nil {
		writeProblem(w, p)
		return
	}
	var req resolveRequest
	if p := readJSON(w, r, s.cfg.MaxBodyBytes, &req); p != nil {
		writeProblem(w, p)
		return
	}
	if strings.TrimSpace(req.Reason) == "" {
		writeProblem(w, invalidField("reason", "A resolution needs a reason: say what was checked, for the op's history."))
		return
	}
	var (
		op  *outbox.Op
		err error
	)
	switch req.Outcome {
	case "succeeded":
		if req.VendorRef == "" {
			writeProblem(w, invalidField("vendor_ref", "Resolving as succeeded needs vendor_ref, the id of the vendor's object."))
			return
		}
		op, err = s.ob.ResolveSucceeded(r.Context(), t.ID, key, req.VendorRef, req.Reason, t.Actor())
	case "failed":
		op, err = s.ob.ResolveFailed(r.Context(), t.ID, key, req.Reason, t.Actor())
	case "resend":
		op, err = s.ob.ReleaseForResend(r.Context(), t.ID, key, req.Reason, t.Actor(), req.NewKey)
	default:
		writeProblem(w, invalidField("outcome", fmt.Sprintf("The outcome %q is not one of succeeded, failed or resend.", req.Outcome)))
		return
	}
	if errors.Is(err, outbox.ErrWrongState) {
		p := protocol.NewProblem(http.StatusConflict, protocol.ProblemWrongState, "Only an op in needs_review or unknown can be resolved by hand.")
		if cur, gerr := s.ob.Get(r.Context(), t.ID, key); gerr == nil {
			p.OpStatus = string(cur.Status)
			p.Detail = fmt.Sprintf("Only an op in needs_review or unknown can be resolved by hand; this one is %s.", cur.Status)
			if errors.Is(err, outbox.ErrAwaitsApproval) && cur.Status == protocol.StatusAwaitingApproval {
				p.Detail = outbox.AwaitsApprovalSentence
			}
		}
		writeProblem(w, p)
		return
	}
	if err != nil {
		s.opError(w, r, err)
		return
	}
	recorderOf(r).opID = op.ID
	out, err := renderOp(op, nil, "")
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeOp(w, http.StatusOK, out)
}

// invalidField is the 400 of a request member that is missing or wrong.
func invalidField(field, detail string) *protocol.Problem {
	p := protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidRequest, detail)
	p.Field = field
	return p
}
