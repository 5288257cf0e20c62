package outbox_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/notify"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/tools"
)

// refundEnv is an outbox of the built-in tools that dispatches nothing: refunds above
// 2000 wait for a person, and notifications go to notifyURL when set.
func refundEnv(t *testing.T, notifyURL string) (*outbox.Outbox, *pgxpool.Pool) {
	t.Helper()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{})...)
	require.NoError(t, err)
	work := notifyURL != ""
	cfg := outbox.Config{Pool: pool, Tools: reg, Work: &work, NoDispatch: true, FetchPollInterval: 50 * time.Millisecond,
		Gate: newGate(t, pool, reg, governance.ApprovalPolicy{protocol.ToolRefund: {Mode: governance.ApprovalAbove, Above: map[string]int64{"*": 2000}}})}
	if notifyURL != "" {
		cfg.Notify = &notify.Config{URL: notifyURL, Secret: []byte("s3cret")}
	}
	ob, err := outbox.New(cfg)
	require.NoError(t, err)
	return ob, pool
}

// settle records op key of the tenant as the vendor having made it, under ref: what a
// dispatch records, without a vendor.
func settle(t *testing.T, ob *outbox.Outbox, pool *pgxpool.Pool, tenant int64, key, tool, args, ref string) {
	t.Helper()
	ctx := context.Background()
	_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: key, Tool: tool, Args: json.RawMessage(args)})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET status = 'succeeded', vendor_ref = nullif($3, '') WHERE tenant_id = $1 AND idempotency_key = $2`,
		tenant, key, ref)
	require.NoError(t, err)
}

// TestPaymentOfRefund: a refund is read against the same tenant's payment whose vendor
// ref it names, with that tenant's succeeded refunds of it summed; another tenant's op
// with the same ref is not it, and a payment made outside oncebox is said to be one.
func TestPaymentOfRefund(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ob, pool := refundEnv(t, "")
	acme, other := optest.Tenant(t, pool, "acme"), optest.Tenant(t, pool, "other")
	settle(t, ob, pool, acme, "pay", protocol.ToolPaymentIntent, `{"amount":29000,"currency":"usd"}`, "pi_1")
	settle(t, ob, pool, other, "pay", protocol.ToolPaymentIntent, `{"amount":777,"currency":"eur"}`, "pi_1")
	settle(t, ob, pool, acme, "r1", protocol.ToolRefund, `{"payment_intent":"pi_1","amount":1000}`, "re_1")
	settle(t, ob, pool, other, "r1", protocol.ToolRefund, `{"payment_intent":"pi_1","amount":500}`, "re_2")
	// A refund that did not succeed refunded nothing.
	_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: acme, Key: "r2", Tool: protocol.ToolRefund, Args: json.RawMessage(`{"payment_intent":"pi_1","amount":300}`)})
	require.NoError(t, err)

	args := json.RawMessage(`{"payment_intent":"pi_1","amount":2500}`)
	p, err := ob.PaymentOf(ctx, acme, protocol.ToolRefund, args)
	require.NoError(t, err)
	require.Equal(t, &outbox.Payment{Ref: "pi_1", Known: true, Amount: 29000, Currency: "usd", Refunded: 1000}, p)
	require.Equal(t, "$25.00 USD of a $290.00 USD payment, $10.00 USD refunded so far", p.Describe(2500, true))
	require.Equal(t, "all that is left ($280.00 USD) of a $290.00 USD payment, $10.00 USD refunded so far", p.Describe(0, false))

	p, err = ob.PaymentOf(ctx, other, protocol.ToolRefund, args)
	require.NoError(t, err)
	require.Equal(t, &outbox.Payment{Ref: "pi_1", Known: true, Amount: 777, Currency: "eur", Refunded: 500}, p, "each tenant its own payment")

	// A full refund that succeeded leaves nothing.
	settle(t, ob, pool, acme, "r3", protocol.ToolRefund, `{"payment_intent":"pi_1"}`, "re_3")
	p, err = ob.PaymentOf(ctx, acme, protocol.ToolRefund, args)
	require.NoError(t, err)
	require.Equal(t, int64(29000), p.Refunded)
	require.Contains(t, p.Describe(2500, true), ": nothing is left to refund")

	p, err = ob.PaymentOf(ctx, acme, protocol.ToolRefund, json.RawMessage(`{"payment_intent":"pi_outside","amount":2500}`))
	require.NoError(t, err)
	require.Equal(t, &outbox.Payment{Ref: "pi_outside"}, p)
	require.Equal(t, "2,500 (currency unknown) of payment pi_outside that oncebox did not make: its amount, currency and earlier refunds are not in oncebox's records",
		p.Describe(2500, true))

	p, err = ob.PaymentOf(ctx, acme, protocol.ToolRefund, json.RawMessage(`{"charge":"ch_1","amount":2500}`))
	require.NoError(t, err)
	require.False(t, p.Known)
	require.Contains(t, p.Describe(2500, true), "of a payment that oncebox did not make")

	p, err = ob.PaymentOf(ctx, acme, protocol.ToolPaymentIntent, json.RawMessage(`{"amount":1,"currency":"usd"}`))
	require.NoError(t, err)
	require.Nil(t, p, "a payment refunds nothing")
}

// TestRefundNotificationNamesItsPayment: the notification of a waiting refund says what
// it takes from its payment, in the payment's currency.
func TestRefundNotificationNamesItsPayment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, b)
	}))
	t.Cleanup(receiver.Close)
	ob, pool := refundEnv(t, receiver.URL)
	acme := optest.Tenant(t, pool, "acme")
	settle(t, ob, pool, acme, "pay", protocol.ToolPaymentIntent, `{"amount":29000,"currency":"usd"}`, "pi_1")
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: acme, Key: "refund", Tool: protocol.ToolRefund,
		Args: json.RawMessage(`{"payment_intent":"pi_1","amount":2500}`)})
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, res.Op.Status)
	require.NoError(t, ob.Start(ctx))
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bodies) == 1
	}, 30*time.Second, 50*time.Millisecond)
	var n struct {
		Amount   int64
		Currency string
		Text     string
		Payment  *outbox.Payment
	}
	mu.Lock()
	require.NoError(t, json.Unmarshal(bodies[0], &n))
	mu.Unlock()
	require.EqualValues(t, 2500, n.Amount)
	require.Equal(t, "usd", n.Currency, "a refund's currency is its payment's")
	require.Contains(t, n.Text, "($25.00 USD of a $290.00 USD payment, $0.00 USD refunded so far) awaits approval")
	require.Equal(t, &outbox.Payment{Ref: "pi_1", Known: true, Amount: 29000, Currency: "usd"}, n.Payment)
}

// TestRefundComparedInItsPaymentsCurrency: a refund's arguments name no currency; the
// approval rule compares its amount with the threshold of its payment's currency. A
// rule with a USD threshold only holds a USD refund above it (it used to let every
// refund through: no threshold for "no currency"), one with a larger USD threshold
// and a smaller "*" one lets a USD refund between them through, and a refund of a
// payment oncebox did not make waits under a rule with named currencies only.
func TestRefundComparedInItsPaymentsCurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		above   map[string]int64
		key     string
		args    string
		waits   bool
		because string
	}{
		{"usd only, above", map[string]int64{"usd": 1000}, "r-above", `{"payment_intent":"pi_1","amount":2500}`, true, "above the approval threshold of $10.00 USD"},
		{"usd only, below", map[string]int64{"usd": 1000}, "r-below", `{"payment_intent":"pi_1","amount":500}`, false, ""},
		{"usd over star", map[string]int64{"usd": 5000, governance.AnyCurrency: 1000}, "r-usd", `{"payment_intent":"pi_1","amount":2500}`, false, ""},
		{"eur payment, usd only", map[string]int64{"usd": 1000}, "r-eur", `{"payment_intent":"pi_eur","amount":2500}`, false, ""},
		{"unknown currency, usd only", map[string]int64{"usd": 1000}, "r-outside", `{"payment_intent":"pi_outside","amount":500}`, true, "does not know its currency"},
		{"unknown currency, star", map[string]int64{"usd": 1000, governance.AnyCurrency: 1000}, "r-outside-star", `{"payment_intent":"pi_outside","amount":500}`, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Schema(t)
			reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{})...)
			require.NoError(t, err)
			work := false
			ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Work: &work, NoDispatch: true,
				Gate: newGate(t, pool, reg, governance.ApprovalPolicy{protocol.ToolRefund: {Mode: governance.ApprovalAbove, Above: c.above}})})
			require.NoError(t, err)
			acme := optest.Tenant(t, pool, "acme")
			settle(t, ob, pool, acme, "pay", protocol.ToolPaymentIntent, `{"amount":29000,"currency":"usd"}`, "pi_1")
			settle(t, ob, pool, acme, "pay-eur", protocol.ToolPaymentIntent, `{"amount":29000,"currency":"eur"}`, "pi_eur")
			_, err = tenant.NewStore(pool).Adopt(ctx, "acme", "stripe", []string{"pi_outside"}, "test")
			require.NoError(t, err)

			res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: acme, Key: c.key, Tool: protocol.ToolRefund, Args: json.RawMessage(c.args)})
			require.NoError(t, err)
			if !c.waits {
				require.Equal(t, protocol.StatusPending, res.Op.Status, res.Why)
				return
			}
			require.Equal(t, protocol.StatusAwaitingApproval, res.Op.Status)
			require.Contains(t, res.Why, c.because)
		})
	}
}

// TestRefundCountsInItsPaymentsCurrency: a budget with a USD limit only counts a refund
// of a USD payment in USD (it used to make every refund wait, its currency unsaid),
// holds the one that would go over, and still holds a refund of a payment oncebox did
// not make, whose currency it cannot know.
func TestRefundCountsInItsPaymentsCurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{})...)
	require.NoError(t, err)
	work := false
	budget := governance.Budget{Name: "refunds-usd", Tool: protocol.ToolRefund, Window: governance.Duration(24 * time.Hour),
		Amount: map[string]int64{"usd": 3000}}
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Work: &work, NoDispatch: true,
		Gate: newGate(t, pool, reg, governance.ApprovalPolicy{}, budget)})
	require.NoError(t, err)
	acme := optest.Tenant(t, pool, "acme")
	settle(t, ob, pool, acme, "pay", protocol.ToolPaymentIntent, `{"amount":29000,"currency":"usd"}`, "pi_1")
	_, err = tenant.NewStore(pool).Adopt(ctx, "acme", "stripe", []string{"pi_outside"}, "test")
	require.NoError(t, err)
	refund := func(key, args string) *outbox.EnqueueResult {
		t.Helper()
		res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: acme, Key: key, Tool: protocol.ToolRefund, Args: json.RawMessage(args)})
		require.NoError(t, err)
		return res
	}
	res := refund("r1", `{"payment_intent":"pi_1","amount":2000}`)
	require.Equal(t, protocol.StatusPending, res.Op.Status, res.Why)
	var used int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(amount) FROM oncebox_budget_usage WHERE budget = 'refunds-usd' AND currency = 'usd'`).Scan(&used))
	require.Equal(t, int64(2000), used)

	res = refund("r2", `{"payment_intent":"pi_1","amount":2000}`)
	require.Equal(t, protocol.StatusAwaitingApproval, res.Op.Status, "over the USD limit")
	res = refund("r3", `{"payment_intent":"pi_outside","amount":100}`)
	require.Equal(t, protocol.StatusAwaitingApproval, res.Op.Status, "a currency oncebox cannot know")
	require.Contains(t, res.Why, "does not name")
}
