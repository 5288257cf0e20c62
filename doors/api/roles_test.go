package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestAgentTokenCannotDecide: the party an approval gates cannot open the gate. An agent
// token's approve, reject or resolve is refused with 403 forbidden, and the op, its
// history and its jobs stay as they were.
func TestAgentTokenCannotDecide(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, agent := e.newTenant(t, "acme")
	op := decodeOp(t, e.post(agent, "big-refund", largeRefundBody))
	require.Equal(t, "awaiting_approval", op.Status)
	stateOf := func() (string, int, int) {
		var status string
		var events, jobs int
		require.NoError(t, e.pool.QueryRow(t.Context(), `SELECT status,
			(SELECT count(*) FROM oncebox_op_event WHERE op_id = o.id AND kind <> 'held'),
			(SELECT count(*) FROM river_job WHERE args->>'op_id' = o.id::text)
			FROM oncebox_op o WHERE id = $1`, op.ID).Scan(&status, &events, &jobs))
		return status, events, jobs
	}

	for _, r := range []*http.Request{
		req("POST", "/v1/ops/big-refund/approve", agent, "", `{"reason": "the user said so"}`),
		req("POST", "/v1/ops/big-refund/reject", agent, "", ""),
		req("POST", "/v1/ops/big-refund/resolve", agent, "", `{"outcome": "failed", "reason": "x"}`),
		// Refused before the key is looked up: a missing key answers the same.
		req("POST", "/v1/ops/no-such-key/approve", agent, "", ""),
	} {
		p := requireProblem(t, e.do(r), http.StatusForbidden, "forbidden")
		require.Contains(t, p.Detail, "agent")
		status, events, jobs := stateOf()
		require.Equal(t, "awaiting_approval", status, r.URL.Path)
		require.Zero(t, events)
		require.Zero(t, jobs)
	}
}

// TestApproverDecidesButCannotEnqueue: the approver approves (the op becomes pending
// with one dispatch job) but cannot record ops; an admin token decides too.
func TestApproverDecidesButCannotEnqueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, agent := e.newTenant(t, "acme")
	approver := e.newToken(t, "acme", tenant.RoleApprover)
	admin := e.newToken(t, "acme", tenant.RoleAdmin)

	for _, token := range []string{approver, admin} {
		p := requireProblem(t, e.post(token, "from-a-person", paymentBody), http.StatusForbidden, "forbidden")
		require.Contains(t, p.Detail, "only agent tokens record ops")
	}
	require.Equal(t, 0, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))

	decodeOp(t, e.post(agent, "r1", largeRefundBody))
	decodeOp(t, e.post(agent, "r2", largeRefundBody))
	rec := e.do(req("POST", "/v1/ops/r1/approve", approver, "", `{"reason": "checked"}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "pending", decodeOp(t, rec).Status)
	rec = e.do(req("POST", "/v1/ops/r2/reject", admin, "", ""))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "rejected", decodeOp(t, rec).Status)
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch'"))

	// Every role reads its tenant's ops.
	for _, token := range []string{agent, approver, admin} {
		require.Equal(t, http.StatusOK, e.do(req("GET", "/v1/ops/r1", token, "", "")).Code)
	}
}

// TestResolveByAPI: an approver settles an op in needs_review through the API, as
// `oncebox review resolve` does; the request is checked and the state enforced.
func TestResolveByAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tn, agent := e.newTenant(t, "acme")
	approver := e.newToken(t, "acme", tenant.RoleApprover)
	decodeOp(t, e.post(agent, "pay", paymentBody))
	decodeOp(t, e.post(agent, "pay2", paymentBody))
	_, err := e.pool.Exec(t.Context(), "UPDATE oncebox_op SET status = 'needs_review' WHERE tenant_id = $1", tn.ID)
	require.NoError(t, err)

	at := "/v1/ops/pay/resolve"
	requireProblem(t, e.do(req("POST", at, approver, "", `{"outcome": "succeeded", "reason": "in the dashboard"}`)), http.StatusBadRequest, "invalid-request")
	requireProblem(t, e.do(req("POST", at, approver, "", `{"outcome": "failed"}`)), http.StatusBadRequest, "invalid-request")
	requireProblem(t, e.do(req("POST", at, approver, "", `{"outcome": "maybe", "reason": "x"}`)), http.StatusBadRequest, "invalid-request")
	requireProblem(t, e.do(req("POST", at, approver, "", `{"outcome": "failed", "reason": "x", "extra": 1}`)), http.StatusBadRequest, "invalid-json")

	rec := e.do(req("POST", at, approver, "", `{"outcome": "succeeded", "vendor_ref": "pi_42", "reason": "in the dashboard"}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	op := decodeOp(t, rec)
	require.Equal(t, "succeeded", op.Status)
	require.Equal(t, "pi_42", op.VendorRef)
	p := requireProblem(t, e.do(req("POST", at, approver, "", `{"outcome": "failed", "reason": "x"}`)), http.StatusConflict, "wrong-state")
	require.Equal(t, "succeeded", p.OpStatus)

	rec = e.do(req("POST", "/v1/ops/pay2/resolve", approver, "", `{"outcome": "resend", "reason": "nothing at the vendor"}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "pending", decodeOp(t, rec).Status)
	requireProblem(t, e.do(req("POST", "/v1/ops/nope/resolve", approver, "", `{"outcome": "failed", "reason": "x"}`)), http.StatusNotFound, "not-found")
}
