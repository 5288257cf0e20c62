package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestFourEyesOverHTTP: under a two-approver rule, the first approver's approval keeps
// the op waiting, the same token again changes nothing, and a second token releases it.
func TestFourEyesOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tn, agent := e.newTenant(t, "acme")
	first := e.newToken(t, "acme", tenant.RoleApprover)
	second := e.newToken(t, "acme", tenant.RoleAdmin)
	_, err := e.gov.SetTenantRule(context.Background(), tn.ID, "stripe.refund", governance.ApprovalRule{Mode: governance.ApprovalAlways, Approvers: 2})
	require.NoError(t, err)
	op := decodeOp(t, e.post(agent, "r", smallRefundBody))
	require.Equal(t, "awaiting_approval", op.Status)

	for range 2 {
		rec := e.do(req("POST", "/v1/ops/r/approve", first, "", `{"reason": "looks right", "fingerprint": "`+op.Fingerprint+`"}`))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, "awaiting_approval", decodeOp(t, rec).Status, "one approver is not enough")
	}
	rec := e.do(req("POST", "/v1/ops/r/approve", second, "", `{"reason": "second pair of eyes"}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "pending", decodeOp(t, rec).Status)
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job WHERE args->>'op_id' = $1", op.ID))

	hist := decodeOp(t, e.do(req("GET", "/v1/ops/r?history=true", agent, "", "")))
	require.Len(t, hist.History.Events, 3)
	require.Equal(t, "held", hist.History.Events[0].Kind)
	require.Equal(t, "approval_given", hist.History.Events[1].Kind)
	require.Contains(t, hist.History.Events[1].Actor, "(approver)")
	require.Equal(t, "approved", hist.History.Events[2].Kind)
	require.Contains(t, hist.History.Events[2].Actor, "(admin)")
}

// TestStaleApprovalsAndExpiryOverHTTP: an approval after the policy changed is 409
// policy-changed and the op keeps waiting; a fingerprint that is not the op's is 409;
// an expired op reads as rejected with the reason "approval expired".
func TestStaleApprovalsAndExpiryOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	tn, agent := e.newTenant(t, "acme")
	approver := e.newToken(t, "acme", tenant.RoleApprover)
	op := decodeOp(t, e.post(agent, "big", largeRefundBody))
	require.Equal(t, "awaiting_approval", op.Status)

	requireProblem(t, e.do(req("POST", "/v1/ops/big/approve", approver, "", `{"fingerprint": "sha256:00"}`)), http.StatusConflict, "fingerprint-mismatch")
	_, err := e.gov.SetTenantRule(ctx, tn.ID, "stripe.refund", governance.ApprovalRule{Mode: governance.ApprovalAlways})
	require.NoError(t, err)
	p := requireProblem(t, e.do(req("POST", "/v1/ops/big/approve", approver, "", "")), http.StatusConflict, "policy-changed")
	require.Equal(t, "awaiting_approval", p.OpStatus, "the op keeps waiting")
	require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job WHERE args->>'op_id' = $1", op.ID))

	_, err = e.pool.Exec(ctx, "UPDATE oncebox_approval SET expires_at = now() - interval '1 second' WHERE op_id = $1", op.ID)
	require.NoError(t, err)
	got := decodeOp(t, e.do(req("GET", "/v1/ops/big", agent, "", "")))
	require.Equal(t, "rejected", got.Status)
	require.Contains(t, string(got.Error), "approval expired")
	replay := e.post(agent, "big", largeRefundBody)
	require.Equal(t, http.StatusOK, replay.Code)
	require.Equal(t, "rejected", decodeOp(t, replay).Status)
	requireProblem(t, e.do(req("POST", "/v1/ops/big/approve", approver, "", "")), http.StatusConflict, "wrong-state")
}

// TestListApprovals: GET /v1/approvals lists what waits for the caller's tenant only,
// oldest first, with the amount, why, who asked (tenant, conversation, token id), since
// and until when; a decided op leaves the list; agents may not list.
func TestListApprovals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, agent := e.newTenant(t, "acme")
	approver := e.newToken(t, "acme", tenant.RoleApprover)
	_, otherAgent := e.newTenant(t, "other")
	agentP, err := e.tenants.Authenticate(context.Background(), agent)
	require.NoError(t, err)

	first := decodeOp(t, e.post(agent, "first", `{"tool": "stripe.refund", "args": {"payment_intent": "pi_1", "amount": 20000}, "conversation_id": "conv-9", "tool_call_id": "call-3"}`))
	decodeOp(t, e.post(agent, "second", `{"tool": "stripe.refund", "args": {"payment_intent": "pi_2"}}`))
	decodeOp(t, e.post(agent, "small", smallRefundBody))
	decodeOp(t, e.post(otherAgent, "theirs", largeRefundBody))

	type item struct {
		Key, Tool, Why, Tenant, Fingerprint string
		ConversationID                      string `json:"conversation_id"`
		ToolCallID                          string `json:"tool_call_id"`
		TokenID                             *int64 `json:"token_id"`
		Amount                              *int64
		RequestedAt                         string `json:"requested_at"`
		ExpiresAt                           string `json:"expires_at"`
		WaitedSeconds                       *int64 `json:"waited_seconds"`
		Approvals                           int
		ApproversNeeded                     int `json:"approvers_needed"`
		Args                                map[string]any
	}
	list := func() []item {
		rec := e.do(req("GET", "/v1/approvals", approver, "", ""))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var body struct{ Approvals []item }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		return body.Approvals
	}
	got := list()
	require.Len(t, got, 2, "only the caller's tenant, only what waits")
	require.Equal(t, "first", got[0].Key)
	require.Equal(t, "second", got[1].Key)
	require.Equal(t, "acme", got[0].Tenant)
	require.Equal(t, "stripe.refund", got[0].Tool)
	require.Equal(t, "conv-9", got[0].ConversationID)
	require.Equal(t, "call-3", got[0].ToolCallID)
	require.NotNil(t, got[0].TokenID)
	require.Equal(t, agentP.TokenID, *got[0].TokenID, "the agent token that asked")
	require.NotNil(t, got[0].Amount)
	require.EqualValues(t, 20000, *got[0].Amount)
	require.Nil(t, got[1].Amount, "a full refund has no amount")
	require.Equal(t, first.Fingerprint, got[0].Fingerprint)
	require.NotEmpty(t, got[0].Why)
	require.NotEmpty(t, got[0].RequestedAt)
	require.NotEmpty(t, got[0].ExpiresAt)
	require.NotNil(t, got[0].WaitedSeconds)
	require.Equal(t, 1, got[0].ApproversNeeded)
	require.Equal(t, "pi_1", got[0].Args["payment_intent"])

	rec := e.do(req("POST", "/v1/ops/first/approve", approver, "", ""))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	got = list()
	require.Len(t, got, 1)
	require.Equal(t, "second", got[0].Key)

	requireProblem(t, e.do(req("GET", "/v1/approvals", agent, "", "")), http.StatusForbidden, "forbidden")
	requireProblem(t, e.do(req("GET", "/v1/approvals?limit=abc", approver, "", "")), http.StatusBadRequest, "invalid-request")
}

// TestResolveCannotReleaseAWaitingOp: resolve (any outcome) of an op that awaits
// approval is 409 wrong-state naming awaiting_approval, whether it has no approval,
// one approval of the two it needs, or an approval wait that ran out; the op keeps
// waiting (or is rejected, once expired) and never gets a dispatch job.
func TestResolveCannotReleaseAWaitingOp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	tn, agent := e.newTenant(t, "acme")
	approver := e.newToken(t, "acme", tenant.RoleApprover)
	admin := e.newToken(t, "acme", tenant.RoleAdmin)
	_, err := e.gov.SetTenantRule(ctx, tn.ID, "stripe.refund", governance.ApprovalRule{Mode: governance.ApprovalAlways, Approvers: 2})
	require.NoError(t, err)

	for _, c := range []struct {
		key       string
		approvals int
		expire    bool
	}{{"zero", 0, false}, {"one", 1, false}, {"expired", 1, true}} {
		op := decodeOp(t, e.post(agent, c.key, smallRefundBody))
		require.Equal(t, "awaiting_approval", op.Status)
		for range c.approvals {
			rec := e.do(req("POST", "/v1/ops/"+c.key+"/approve", approver, "", `{"reason": "ok"}`))
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		}
		if c.expire {
			_, err := e.pool.Exec(ctx, "UPDATE oncebox_approval SET expires_at = now() - interval '1 second' WHERE op_id = $1", op.ID)
			require.NoError(t, err)
		}
		for _, body := range []string{`{"outcome": "resend", "reason": "go"}`, `{"outcome": "resend", "reason": "go", "new_key": true}`,
			`{"outcome": "failed", "reason": "no"}`, `{"outcome": "succeeded", "vendor_ref": "re_1", "reason": "yes"}`} {
			for _, tok := range []string{approver, admin} {
				p := requireProblem(t, e.do(req("POST", "/v1/ops/"+c.key+"/resolve", tok, "", body)), http.StatusConflict, "wrong-state")
				if c.expire {
					require.Equal(t, "rejected", p.OpStatus, c.key)
					continue
				}
				require.Equal(t, "awaiting_approval", p.OpStatus, c.key)
				require.Contains(t, p.Detail, "only its approval can release it", c.key)
			}
		}
		require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job WHERE args->>'op_id' = $1", op.ID), c.key)
		require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op_event WHERE op_id = $1 AND kind = 'manual_resolution'", op.ID), c.key)
	}
}

// TestFourEyesCountsPeople: two tokens of one person (an approver and an admin token of
// alice@example.com) are one voter: the op keeps waiting after both approve, and a
// second person releases it. The history names the person.
func TestFourEyesCountsPeople(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	tn, agent := e.newTenant(t, "acme")
	aliceApprover, err := e.tenants.NewTokenFor(ctx, "acme", tenant.RoleApprover, "Alice@example.com")
	require.NoError(t, err)
	aliceAdmin, err := e.tenants.NewTokenFor(ctx, "acme", tenant.RoleAdmin, "alice@example.com ")
	require.NoError(t, err)
	bob, err := e.tenants.NewTokenFor(ctx, "acme", tenant.RoleApprover, "bob@example.com")
	require.NoError(t, err)
	_, err = e.gov.SetTenantRule(ctx, tn.ID, "stripe.refund", governance.ApprovalRule{Mode: governance.ApprovalAlways, Approvers: 2})
	require.NoError(t, err)
	op := decodeOp(t, e.post(agent, "r", smallRefundBody))
	require.Equal(t, "awaiting_approval", op.Status)

	for _, tok := range []string{aliceApprover, aliceAdmin} {
		rec := e.do(req("POST", "/v1/ops/r/approve", tok, "", `{"reason": "ok"}`))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, "awaiting_approval", decodeOp(t, rec).Status, "one person is one voter, whatever their tokens")
	}
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_approval_vote WHERE op_id = $1", op.ID))
	rec := e.do(req("POST", "/v1/ops/r/approve", bob, "", `{"reason": "second person"}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "pending", decodeOp(t, rec).Status)
	hist := decodeOp(t, e.do(req("GET", "/v1/ops/r?history=true", agent, "", "")))
	require.Contains(t, hist.History.Events[1].Actor, "alice@example.com")
	require.Contains(t, hist.History.Events[2].Actor, "bob@example.com")

	_, err = e.tenants.NewTokenFor(ctx, "acme", tenant.RoleApprover, "a\x07b")
	require.Error(t, err, "a person with a control character is refused")
}

// TestAwaitingOpSaysWhy: POST /v1/ops answering awaiting_approval carries why, the
// sentence MCP gives and the approvers list; so do its replay and GET while it waits.
// An op that does not wait, or no longer does, has an empty why.
func TestAwaitingOpSaysWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, agent := e.newTenant(t, "acme")
	approver := e.newToken(t, "acme", tenant.RoleApprover)

	rec := e.post(agent, "big", largeRefundBody)
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	op := decodeOp(t, rec)
	require.Equal(t, "awaiting_approval", op.Status)
	require.NotEmpty(t, op.Why)
	var listed struct{ Approvals []struct{ Key, Why string } }
	list := e.do(req("GET", "/v1/approvals", approver, "", ""))
	require.NoError(t, json.Unmarshal(list.Body.Bytes(), &listed))
	require.Len(t, listed.Approvals, 1)
	require.Equal(t, listed.Approvals[0].Why, op.Why, "the sentence the approvers read")

	replay := e.post(agent, "big", largeRefundBody)
	require.Equal(t, http.StatusOK, replay.Code)
	require.Equal(t, op.Why, decodeOp(t, replay).Why, "a replay says why too")
	require.Equal(t, op.Why, decodeOp(t, e.do(req("GET", "/v1/ops/big", agent, "", ""))).Why)

	rec = e.do(req("POST", "/v1/ops/big/approve", approver, "", ""))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	approved := decodeOp(t, rec)
	require.Equal(t, "pending", approved.Status)
	require.Empty(t, approved.Why)
	require.Contains(t, rec.Body.String(), `"why":""`, "every member is sent, empty or not")
	small := decodeOp(t, e.post(agent, "small", smallRefundBody))
	require.NotEqual(t, "awaiting_approval", small.Status)
	require.Empty(t, small.Why)
}
