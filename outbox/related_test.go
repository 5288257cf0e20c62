package outbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestRelatedStaysInItsTenant: a payment's refunds are its tenant's refunds that name
// it by its PaymentIntent or by its charge (the payment's result's latest_charge); a
// charge finds its payment; another tenant's payment and refunds under the same ids
// are never listed.
func TestRelatedStaysInItsTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ob, pool := refundEnv(t, "")
	acme, other := optest.Tenant(t, pool, "acme"), optest.Tenant(t, pool, "other")
	for _, tn := range []int64{acme, other} {
		settle(t, ob, pool, tn, "pay", protocol.ToolPaymentIntent, `{"amount":5000,"currency":"usd"}`, "pi_1")
		_, err := pool.Exec(ctx, `UPDATE oncebox_op SET result = '{"id":"pi_1","latest_charge":"ch_1"}' WHERE tenant_id = $1 AND idempotency_key = 'pay'`, tn)
		require.NoError(t, err)
	}
	settle(t, ob, pool, acme, "r-pi", protocol.ToolRefund, `{"payment_intent":"pi_1","amount":500}`, "re_1")
	// Refunds by charge, as Stripe admits them (its tag names the op; no Tag is set here).
	settle(t, ob, pool, acme, "r-ch", protocol.ToolRefund, `{"payment_intent":"pi_1","amount":300}`, "re_2")
	settle(t, ob, pool, other, "r-other", protocol.ToolRefund, `{"payment_intent":"pi_1","amount":100}`, "re_3")
	_, err := pool.Exec(ctx, `UPDATE oncebox_op SET args = jsonb_build_object('charge', 'ch_1', 'amount', args->'amount')
		WHERE idempotency_key IN ('r-ch', 'r-other')`)
	require.NoError(t, err)

	keys := func(ops []*outbox.Op) []string {
		var out []string
		for _, op := range ops {
			out = append(out, op.Key)
		}
		return out
	}
	found, err := ob.Find(ctx, acme, "ch_1", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"pay"}, keys(found), "a charge finds its payment, the tenant's own")
	rel, err := ob.Related(ctx, acme, found[0])
	require.NoError(t, err)
	require.Equal(t, "pay", rel.Payment.Key)
	require.Equal(t, []string{"r-pi", "r-ch"}, keys(rel.Refunds), "by PaymentIntent and by charge, the tenant's own")

	refund, err := ob.Get(ctx, other, "r-other")
	require.NoError(t, err)
	rel, err = ob.Related(ctx, other, refund)
	require.NoError(t, err)
	require.Equal(t, other, rel.Payment.TenantID)
	require.Equal(t, "ch_1", rel.PaymentRef)
	require.Equal(t, []string{"r-other"}, keys(rel.Refunds))

	lone, err := ob.Get(ctx, acme, "r-pi")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key = 'pay'`, acme)
	require.NoError(t, err)
	rel, err = ob.Related(ctx, acme, lone)
	require.NoError(t, err)
	require.Nil(t, rel.Payment, "a payment no longer kept is not another tenant's")
	require.Equal(t, []string{"r-pi"}, keys(rel.Refunds))
}
