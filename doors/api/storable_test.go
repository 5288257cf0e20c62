package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"
)

// TestUnstorableInputIs400 sends, to every endpoint that stores what it is given,
// input that is valid JSON but that Postgres cannot store: numbers whose exponent is
// out of numeric's range, U+0000, unpaired surrogates, invalid UTF-8, nesting past
// the limit. Each must be a 400 problem, never a 500.
func TestUnstorableInputIs400(t *testing.T) {
	e := newEnv(t)
	tn, token := e.newTenant(t, "acme")
	approver := e.newToken(t, "acme", tenant.RoleApprover)

	webhook := func(body string) string {
		return `{"tool": "webhook.post", "args": {"target": "crm", "path": "/hook", "body": ` + body + `}}`
	}
	bodies := map[string]string{
		"huge exponent":         webhook(`1e200000`),
		"huge exponent upper":   webhook(`{"a": [1E+999999999999]}`),
		"tiny exponent":         webhook(`1e-20000`),
		"long fraction":         webhook(`0.` + strings.Repeat("1", 17000)),
		"nul in value":          webhook(`{"a": "x\u0000"}`),
		"nul in key":            webhook(`{"a\u0000": 1}`),
		"lone high surrogate":   webhook(`"\ud800"`),
		"lone low surrogate":    webhook(`{"\udc00": 1}`),
		"invalid utf-8":         webhook("\"\xff\xfe\""),
		"invalid utf-8 in key":  webhook("{\"\xc3\": 1}"),
		"too deep":              webhook(strings.Repeat("[", 70) + strings.Repeat("]", 70)),
		"nul conversation":      `{"tool": "stripe.payment_intent", "args": {"amount": 1, "currency": "usd"}, "conversation_id": "\u0000"}`,
		"surrogate in metadata": `{"tool": "stripe.payment_intent", "args": {"amount": 1, "currency": "usd", "metadata": {"k": "\udfff"}}}`,
	}
	i := 0
	for name, body := range bodies {
		i++
		t.Run(name, func(t *testing.T) {
			rec := e.post(token, fmt.Sprintf("bad-%d", i), body)
			requireProblem(t, rec, http.StatusBadRequest, "invalid-args")
		})
	}

	// Approve and reject store their reason. (An unpaired surrogate or invalid UTF-8
	// in it is replaced by U+FFFD when the body is decoded, so only U+0000 is left.)
	for j, reason := range []string{`"no\u0000"`, `"\u0000"`} {
		for _, action := range []string{"approve", "reject"} {
			key := fmt.Sprintf("refund-%s-%d", action, j)
			require.Equal(t, http.StatusAccepted, e.post(token, key, largeRefundBody).Code)
			rec := e.do(req("POST", "/v1/ops/"+key+"/"+action, approver, "", `{"reason": `+reason+`}`))
			p := requireProblem(t, rec, http.StatusBadRequest, "invalid-args")
			require.Equal(t, "reason", p.Field)
			got := decodeOp(t, e.do(req("GET", "/v1/ops/"+key, token, "", "")))
			require.Equal(t, "awaiting_approval", got.Status, "a refused decision changes nothing")
		}
	}

	// Resolve stores its reason and vendor_ref.
	require.Equal(t, http.StatusAccepted, e.post(token, "review-me", paymentBody).Code)
	_, err := e.pool.Exec(t.Context(), "UPDATE oncebox_op SET status = 'needs_review' WHERE tenant_id = $1 AND idempotency_key = 'review-me'", tn.ID)
	require.NoError(t, err)
	for field, body := range map[string]string{
		"reason":     `{"outcome": "failed", "reason": "no\u0000"}`,
		"vendor_ref": `{"outcome": "succeeded", "vendor_ref": "pi_\u0000", "reason": "x"}`,
	} {
		p := requireProblem(t, e.do(req("POST", "/v1/ops/review-me/resolve", approver, "", body)), http.StatusBadRequest, "invalid-args")
		require.Equal(t, field, p.Field)
	}
	got := decodeOp(t, e.do(req("GET", "/v1/ops/review-me", token, "", "")))
	require.Equal(t, "needs_review", got.Status, "a refused resolution changes nothing")
}
