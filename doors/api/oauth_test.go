package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/oauth"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/oauthas"
)

// TestFourEyesCountsAccessTokenSubjects (issue 45, item 1): under a two-approver
// rule, two access tokens of one subject, issued by a running authorization server,
// are one voter; a second subject releases the op; an agent's access token never
// approves. The history names the subjects.
func TestFourEyesCountsAccessTokenSubjects(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	as := oauthas.Start()
	t.Cleanup(as.Close)
	const resource = "https://oncebox.example.com"
	e := newEnv(t)
	v, err := oauth.New(oauth.Config{Issuer: as.Issuer(), Audience: resource})
	require.NoError(t, err)
	e.tenants.AcceptAccessTokens(v)
	tn, _ := e.newTenant(t, "acme")
	_, err = e.gov.SetTenantRule(ctx, tn.ID, "stripe.refund", governance.ApprovalRule{Mode: governance.ApprovalAlways, Approvers: 2})
	require.NoError(t, err)
	mint := func(sub, scope string) string {
		return as.Mint(map[string]any{"sub": sub, "aud": resource, "scope": scope, "oncebox_tenant": "acme"}, time.Hour)
	}
	agent := mint("agent-7", "oncebox:agent")
	op := decodeOp(t, e.post(agent, "r", smallRefundBody))
	require.Equal(t, "awaiting_approval", op.Status)

	rec := e.do(req("POST", "/v1/ops/r/approve", agent, "", `{"reason": "me"}`))
	require.Equal(t, http.StatusForbidden, rec.Code, "an agent's access token never approves: %s", rec.Body.String())
	for _, tok := range []string{mint("alice", "oncebox:approver"), mint("alice", "oncebox:admin")} {
		rec := e.do(req("POST", "/v1/ops/r/approve", tok, "", `{"reason": "ok"}`))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, "awaiting_approval", decodeOp(t, rec).Status, "one subject is one voter, whatever its tokens")
	}
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_approval_vote WHERE op_id = $1", op.ID))
	rec = e.do(req("POST", "/v1/ops/r/approve", mint("bob", "oncebox:approver"), "", `{"reason": "second person"}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "pending", decodeOp(t, rec).Status)
	hist := decodeOp(t, e.do(req("GET", "/v1/ops/r?history=true", agent, "", "")))
	require.Contains(t, hist.History.Events[1].Actor, "oauth alice")
	require.Contains(t, hist.History.Events[2].Actor, "oauth bob")

	both := mint("carol", "oncebox:agent oncebox:approver")
	rec = e.do(req("GET", "/v1/ops/r", both, "", ""))
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Contains(t, rec.Body.String(), "several oncebox roles")
}
