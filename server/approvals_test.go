package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/tenant"
)

// TestApproverReleasesExactlyOneRefund runs the whole path in a real server with the
// fake Stripe: a refund above --refund-approval-above (the shorthand of the refund
// policy) waits; the agent's own token cannot approve it (403, nothing at Stripe); the
// approver's can (200), and Stripe then holds exactly one refund; approving again
// changes nothing.
func TestApproverReleasesExactlyOneRefund(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake := fakestripe.New(fakestripe.Config{})
	stripe := httptest.NewServer(fake)
	t.Cleanup(stripe.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_approvals", stripe.URL
	cfg.RefundApprovalAbove = 1000
	_, base := runServer(t, ctx, cfg)

	tenants := tenant.NewStore(pool)
	_, agent, err := tenants.Create(ctx, "acme")
	require.NoError(t, err)
	approver, err := tenants.NewTokenWithRole(ctx, "acme", tenant.RoleApprover)
	require.NoError(t, err)
	call := func(method, path, token, key, body string) (int, map[string]any) {
		status, _, out := apiCall(t, ctx, base+path, method, token, key, body)
		return status, out
	}

	status, pay := call("POST", "/v1/ops?wait=20s", agent, "pay-1",
		`{"tool": "stripe.payment_intent", "args": {"amount": 5000, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}}`)
	require.Equal(t, http.StatusAccepted, status, pay)
	require.Equal(t, "succeeded", pay["status"], pay)
	pi := pay["vendor_ref"].(string)

	status, refund := call("POST", "/v1/ops", agent, "refund-1", `{"tool": "stripe.refund", "args": {"payment_intent": "`+pi+`", "amount": 4000}}`)
	require.Equal(t, http.StatusAccepted, status, refund)
	require.Equal(t, "awaiting_approval", refund["status"])

	status, problem := call("POST", "/v1/ops/refund-1/approve", agent, "", `{"reason": "the customer asked me"}`)
	require.Equal(t, http.StatusForbidden, status)
	require.True(t, strings.HasSuffix(problem["type"].(string), "forbidden"), problem)
	time.Sleep(300 * time.Millisecond)
	require.Empty(t, fake.Refunds(), "an agent's approval sends nothing")

	status, approved := call("POST", "/v1/ops/refund-1/approve", approver, "", `{"reason": "checked the order"}`)
	require.Equal(t, http.StatusOK, status, approved)
	// The approval releases the op; the worker may already have sent it by the time the
	// answer reads it back.
	require.Contains(t, []any{"pending", "dispatching", "succeeded"}, approved["status"], approved)
	status, settled := call("GET", "/v1/ops/refund-1?wait=20s&history=true", agent, "", "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "succeeded", settled["status"], settled)
	status, _ = call("POST", "/v1/ops/refund-1/approve", approver, "", "")
	require.Equal(t, http.StatusOK, status, "the same decision again is 200")
	time.Sleep(300 * time.Millisecond)
	require.Len(t, fake.Refunds(), 1, "exactly one refund at Stripe")
}
