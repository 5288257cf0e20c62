package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/tenant"
)

// budgetServer runs a real server with the fake Stripe and budgets, and returns a
// caller of its API, the agent and approver tokens, and the fake.
func budgetServer(t *testing.T, budgets []governance.Budget) (func(method, path, token, key, body string) (int, map[string]any), string, string, *fakestripe.Server) {
	t.Helper()
	call, agent, approver, fake, _ := budgetServerPool(t, budgets)
	return call, agent, approver, fake
}

// budgetServerPool is budgetServer that also returns the server's pool (tenant acme).
func budgetServerPool(t *testing.T, budgets []governance.Budget) (func(method, path, token, key, body string) (int, map[string]any), string, string, *fakestripe.Server, *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fake := fakestripe.New(fakestripe.Config{})
	stripe := httptest.NewServer(fake)
	t.Cleanup(stripe.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_budgets", stripe.URL
	cfg.Budgets = budgets
	_, base := runServer(t, ctx, cfg)
	tenants := tenant.NewStore(pool)
	_, agent, err := tenants.Create(ctx, "acme")
	require.NoError(t, err)
	// A payment made outside oncebox, which Stripe does not know: adopted, so that its
	// refund is priced (and not refused as another tenant's).
	_, err = tenants.Adopt(ctx, "acme", "stripe", []string{"pi_unknown000000000000000"}, "test")
	require.NoError(t, err)
	approver, err := tenants.NewTokenWithRole(ctx, "acme", tenant.RoleApprover)
	require.NoError(t, err)
	call := func(method, path, token, key, body string) (int, map[string]any) {
		status, _, out := apiCall(t, ctx, base+path, method, token, key, body)
		return status, out
	}
	return call, agent, approver, fake, pool
}

// budgetUsed returns GET /v1/budgets' used amount of a budget's currency row.
func budgetUsed(t *testing.T, call func(method, path, token, key, body string) (int, map[string]any), token, budget, currency string) float64 {
	t.Helper()
	status, out := call("GET", "/v1/budgets", token, "", "")
	require.Equal(t, http.StatusOK, status, out)
	for _, it := range out["budgets"].([]any) {
		row := it.(map[string]any)
		if row["budget"] == budget && row["currency"] == currency && row["scope"] == "tenant" {
			return row["used"].(float64)
		}
	}
	t.Fatalf("no %s row of budget %s in %v", currency, budget, out)
	return 0
}

// TestFullRefundsCountAgainstAnAmountBudget: a refund with only payment_intent is
// counted at what it will refund (the payment's refundable amount, asked of Stripe),
// so four full refunds of 29,000 under a 50,000 budget admit one and send the rest to
// approval, and GET /v1/budgets says 29,000 used; a refund of a payment Stripe does not
// know cannot be priced and waits for approval, saying so; Stripe holds one refund.
func TestFullRefundsCountAgainstAnAmountBudget(t *testing.T) {
	t.Parallel()
	call, agent, approver, fake := budgetServer(t, []governance.Budget{
		{Name: "refunds-daily", Tool: "stripe.refund", Window: governance.Duration(24 * time.Hour), Amount: map[string]int64{"*": 50000}},
	})
	statuses := map[string]int{}
	for i := range 4 {
		status, pay := call("POST", "/v1/ops?wait=20s", agent, fmt.Sprintf("pay-%d", i),
			`{"tool": "stripe.payment_intent", "args": {"amount": 29000, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}}`)
		require.Equal(t, http.StatusAccepted, status, pay)
		require.Equal(t, "succeeded", pay["status"], pay)
		status, refund := call("POST", "/v1/ops", agent, fmt.Sprintf("refund-%d", i),
			`{"tool": "stripe.refund", "args": {"payment_intent": "`+pay["vendor_ref"].(string)+`"}}`)
		require.Equal(t, http.StatusAccepted, status, refund)
		statuses[refund["status"].(string)]++
	}
	require.Equal(t, map[string]int{"pending": 1, "awaiting_approval": 3}, statuses)
	require.Equal(t, float64(29000), budgetUsed(t, call, agent, "refunds-daily", "*"))
	status, list := call("GET", "/v1/approvals", approver, "", "")
	require.Equal(t, http.StatusOK, status)
	raw, _ := json.Marshal(list)
	require.Contains(t, string(raw), `budget \"refunds-daily\"`)

	status, unknown := call("POST", "/v1/ops", agent, "refund-x", `{"tool": "stripe.refund", "args": {"payment_intent": "pi_unknown000000000000000"}}`)
	require.Equal(t, http.StatusAccepted, status, unknown)
	require.Equal(t, "awaiting_approval", unknown["status"])
	status, list = call("GET", "/v1/approvals", approver, "", "")
	require.Equal(t, http.StatusOK, status)
	raw, _ = json.Marshal(list)
	require.Contains(t, string(raw), "cannot price it")
	require.Eventually(t, func() bool { return len(fake.Refunds()) == 1 }, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, float64(29000), budgetUsed(t, call, agent, "refunds-daily", "*"))
}

// TestStarIsOneLimitAcrossCurrencies: under {"*": 30000}, seven payment intents of
// 29,000 in seven currencies admit one (the "*" limit is shared by every currency the
// budget does not name); under {"usd": 30000} alone, an amount in a currency the budget
// does not name waits for approval, whatever on_exceed says.
func TestStarIsOneLimitAcrossCurrencies(t *testing.T) {
	t.Parallel()
	call, agent, _, fake := budgetServer(t, []governance.Budget{
		{Name: "star", Tool: "stripe.payment_intent", Window: governance.Duration(24 * time.Hour), Amount: map[string]int64{"*": 30000},
			OtherCurrencies: governance.OthersShared},
		{Name: "usd-only", Tool: "stripe.payment_intent", Scope: governance.ScopeConversation, Window: governance.Duration(24 * time.Hour),
			Amount: map[string]int64{"usd": 30000}, OtherCurrencies: governance.OthersApproval, OnExceed: governance.ExceedRefuse},
	})
	statuses := map[string]int{}
	for i, cur := range []string{"usd", "eur", "gbp", "jpy", "chf", "cad", "aud"} {
		status, op := call("POST", "/v1/ops", agent, fmt.Sprintf("pay-%d", i),
			`{"tool": "stripe.payment_intent", "args": {"amount": 29000, "currency": "`+cur+`", "payment_method": "pm_card_visa", "confirm": true}}`)
		require.Equal(t, http.StatusAccepted, status, op)
		statuses[op["status"].(string)]++
	}
	require.Equal(t, map[string]int{"pending": 1, "awaiting_approval": 6}, statuses)
	require.Equal(t, float64(29000), budgetUsed(t, call, agent, "star", "*"))
	require.Eventually(t, func() bool { return len(fake.PaymentIntents()) == 1 }, 20*time.Second, 50*time.Millisecond)

	// usd-only names usd: a eur amount in a conversation waits (it is not refused, and
	// it is not let through unlimited).
	status, op := call("POST", "/v1/ops", agent, "conv-eur",
		`{"tool": "stripe.payment_intent", "args": {"amount": 100, "currency": "eur", "payment_method": "pm_card_visa"}, "conversation_id": "c1"}`)
	require.Equal(t, http.StatusAccepted, status, op)
	require.Equal(t, "awaiting_approval", op["status"])
}

// TestConversationBudgetIsNotSteppedAround: a conversation-scoped budget (2 ops, refuse,
// 2 conversations' worth per token) cannot be escaped by leaving the conversation out
// (the ops of a token without one count together) nor by naming a new conversation
// per call (each token's total across its conversations is capped at 4); another
// token counts apart. The refusals are 429 budget-exceeded, and the fake Stripe saw
// only the admitted payments.
func TestConversationBudgetIsNotSteppedAround(t *testing.T) {
	t.Parallel()
	call, agent, _, fake, pool := budgetServerPool(t, []governance.Budget{{Name: "conv-cap", Tool: "stripe.payment_intent",
		Scope: governance.ScopeConversation, Window: governance.Duration(time.Hour), Count: 2, Conversations: 2,
		OnExceed: governance.ExceedRefuse}})
	other, err := tenant.NewStore(pool).NewTokenWithRole(context.Background(), "acme", tenant.RoleAgent)
	require.NoError(t, err)
	pay := func(token, key, conversation string) (int, map[string]any) {
		body := `{"tool": "stripe.payment_intent", "args": {"amount": 100, "currency": "usd", "payment_method": "pm_card_visa"}`
		if conversation != "" {
			body += `, "conversation_id": "` + conversation + `"`
		}
		return call("POST", "/v1/ops", token, key, body+"}")
	}
	var got []int
	for i := range 3 {
		status, _ := pay(agent, fmt.Sprintf("none-%d", i), "")
		got = append(got, status)
	}
	require.Equal(t, []int{202, 202, 429}, got, "no conversation: the token's ops without one count together")

	got = nil
	var refusal map[string]any
	for i := range 5 {
		status, out := pay(other, fmt.Sprintf("new-%d", i), fmt.Sprintf("conv-%d", i))
		got = append(got, status)
		refusal = out
	}
	require.Equal(t, []int{202, 202, 202, 202, 429}, got, "a new conversation per call: capped per token at 2 conversations' worth")
	require.Equal(t, "conv-cap", refusal["budget"], refusal)
	require.Contains(t, refusal["detail"], "across all its conversations", refusal)
	require.Eventually(t, func() bool { return len(fake.PaymentIntents()) == 6 }, 20*time.Second, 50*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	require.Len(t, fake.PaymentIntents(), 6, "the refused calls never reached Stripe")
}
