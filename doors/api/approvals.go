package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/oncebox/oncebox/tenant"
)

// maxApprovalsListed bounds GET /v1/approvals.
const maxApprovalsListed = 500

// approvalItem is one op that waits for a person, as GET /v1/approvals lists it.
type approvalItem struct {
	Key         string          `json:"key"`
	OpID        string          `json:"op_id"`
	Tool        string          `json:"tool"`
	Args        json.RawMessage `json:"args"`
	Fingerprint string          `json:"fingerprint"`
	Amount      *int64          `json:"amount"`
	Currency    string          `json:"currency"`
	Why         string          `json:"why"`
	Tenant      string          `json:"tenant"`
	// ConversationID, ToolCallID and TokenID say who asked.
	ConversationID  string    `json:"conversation_id"`
	ToolCallID      string    `json:"tool_call_id"`
	TokenID         *int64    `json:"token_id"`
	RequestedAt     time.Time `json:"requested_at"`
	WaitedSeconds   int64     `json:"waited_seconds"`
	ExpiresAt       time.Time `json:"expires_at"`
	Approvals       int       `json:"approvals"`
	ApproversNeeded int       `json:"approvers_needed"`
	PolicyVersion   string    `json:"policy_version"`
}

// listApprovals is GET /v1/approvals: the ops of the caller's tenant that wait for a
// person, oldest first, with redacted arguments.
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, t *tenant.Principal) {
	limit := 100
	if raw := r.URL.Query().Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxApprovalsListed {
			writeProblem(w, invalidField("limit", fmt.Sprintf("The limit %q is not a whole number from 1 to %d.", raw, maxApprovalsListed)))
			return
		}
		limit = n
	}
	waiting, err := s.ob.ListWaiting(r.Context(), t.ID, limit)
	if err != nil {
		s.opError(w, r, err)
		return
	}
	now := time.Now()
	items := make([]approvalItem, 0, len(waiting))
	for _, wt := range waiting {
		it := approvalItem{Key: wt.Op.Key, OpID: wt.Op.ID, Tool: wt.Op.Tool, Args: wt.Op.Args, Fingerprint: wt.Op.Fingerprint.String(),
			Why: wt.Why, Tenant: t.Name, ConversationID: wt.Op.ConversationID, ToolCallID: wt.Op.ToolCallID,
			RequestedAt: wt.RequestedAt.UTC(), WaitedSeconds: int64(now.Sub(wt.RequestedAt).Seconds()), ExpiresAt: wt.ExpiresAt.UTC(),
			Approvals: wt.Approvals, ApproversNeeded: wt.ApproversNeeded, PolicyVersion: wt.PolicyVersion}
		if wt.HasAmount {
			amount := wt.Amount
			it.Amount, it.Currency = &amount, wt.Currency
		}
		if wt.RequestedByToken != 0 {
			id := wt.RequestedByToken
			it.TokenID = &id
		}
		items = append(items, it)
	}
	body, err := json.Marshal(map[string]any{"approvals": items})
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, body)
}
