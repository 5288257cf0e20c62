package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// refundedTwice records, through a running `oncebox serve` and the fake Stripe, a
// $50.00 payment and three refunds of it: $5.00 by its PaymentIntent and $3.00 by its
// charge (both done), and $25.00 waiting for approval. It returns the payment's
// PaymentIntent and charge ids.
func refundedTwice(ctx context.Context, t *testing.T, cs *consoleServe) (pi, ch string) {
	t.Helper()
	op := cs.record(ctx, t, "order-2001-pay", `{"tool":"stripe.payment_intent","args":{"amount":5000,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`)
	require.Equal(t, "succeeded", op["status"], op)
	pi = op["vendor_ref"].(string)
	result, _ := op["result"].(map[string]any)
	ch, _ = result["latest_charge"].(string)
	require.Regexp(t, `^ch_`, ch, "the payment's result names its charge: %v", op)
	op = cs.record(ctx, t, "order-2001-refund-a", `{"tool":"stripe.refund","args":{"payment_intent":"`+pi+`","amount":500}}`)
	require.Equal(t, "succeeded", op["status"], op)
	op = cs.record(ctx, t, "order-2001-refund-b", `{"tool":"stripe.refund","args":{"charge":"`+ch+`","amount":300}}`)
	require.Equal(t, "succeeded", op["status"], op)
	op = cs.record(ctx, t, "order-2001-refund-c", `{"tool":"stripe.refund","args":{"payment_intent":"`+pi+`","amount":2500}}`)
	require.Equal(t, "awaiting_approval", op["status"], op)
	require.Len(t, cs.fake.Refunds(), 2, "the fake Stripe holds the two refunds done")
	return pi, ch
}

// TestLookupFollowsAPaymentToItsRefunds answers "was I refunded twice?" from the CLI:
// the lookup of a payment's pi_… shows its amount and every refund asked for of it
// (made by its PaymentIntent or by its charge, done or waiting); the lookup of its
// ch_… finds the payment; the lookup of one refund shows the payment and its sibling
// refunds, with its own amount against the payment.
func TestLookupFollowsAPaymentToItsRefunds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := startConsoleServe(ctx, t)
	pi, ch := refundedTwice(ctx, t, cs)

	for _, term := range []string{pi, ch} {
		out, errOut, code := runCLI(t, "lookup --tenant acme "+term, cs.env...)
		require.Zero(t, code, "lookup %s: %s", term, errOut)
		require.Regexp(t, `key\s+order-2001-pay\n`, out, "lookup %s finds the payment", term)
		require.Regexp(t, `amount\s+\$50\.00 USD\n`, out)
		require.Contains(t, out, "payment and refunds:")
		require.Regexp(t, `refund\s+order-2001-refund-a\s+re_\S+\s+\$5\.00 USD\s+done`, out)
		require.Regexp(t, `refund\s+order-2001-refund-b\s+re_\S+\s+\$3\.00 USD\s+done`, out)
		require.Regexp(t, `refund\s+order-2001-refund-c\s+-\s+\$25\.00 USD\s+waiting for approval`, out)
		require.Contains(t, out, "3 refund(s) asked for of this payment, 2 done")
	}

	out, errOut, code := runCLI(t, "lookup --tenant acme order-2001-refund-b", cs.env...)
	require.Zero(t, code, errOut)
	require.Regexp(t, `amount\s+\$3\.00 USD of a \$50\.00 USD payment, \$8\.00 USD refunded so far\n`, out)
	require.Regexp(t, `payment\s+order-2001-pay\s+`+pi+`\s+\$50\.00 USD\s+done`, out)
	require.Regexp(t, `refund\s+order-2001-refund-b\s+re_\S+\s+\$3\.00 USD\s+done\s+\(this op\)`, out)
	require.Contains(t, out, "order-2001-refund-a")
}

// TestReviewListShowsApprovals: `oncebox review list` lists every op that waits for a
// person, those awaiting approval with those in needs_review, and says which wait is
// which.
func TestReviewListShowsApprovals(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := startConsoleServe(ctx, t)
	refundedTwice(ctx, t, cs)
	cs.needsReview(ctx, t, "order-0998-pay")

	out, errOut, code := runCLI(t, "review list --tenant acme", cs.env...)
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^acme\s+order-0998-pay\s+stripe\.payment_intent\s+review\s`, out)
	require.Regexp(t, `(?m)^acme\s+order-2001-refund-c\s+stripe\.refund\s+approval\s+0\s+\S+\s+\S`, out)
	require.NotContains(t, out, "order-2001-refund-a", "a settled op waits for no one")
}
