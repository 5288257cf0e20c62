package stripe_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	stripego "github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/stripe"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// e2e is a real Outbox with its dispatch worker, in a schema of its own,
// dispatching to a harness's fake Stripe.
type e2e struct {
	*harness
	ob     *outbox.Outbox
	pool   *pgxpool.Pool
	tenant int64
}

func newE2E(t *testing.T, o harnessOpts) *e2e {
	t.Helper()
	h := newHarness(t, o)
	pool := dbtest.Schema(t)
	ctx := context.Background()
	var tenant int64
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('t') RETURNING id").Scan(&tenant))
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{})...)
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Vendors: []vendorapi.Vendor{h.v}, FetchPollInterval: 50 * time.Millisecond,
		RetryBackoff: func(int) time.Duration { return 50 * time.Millisecond }})
	require.NoError(t, err)
	require.NoError(t, ob.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ob.Stop(sctx)
	})
	return &e2e{harness: h, ob: ob, pool: pool, tenant: tenant}
}

func (e *e2e) enqueue(t *testing.T, key, tool string, args any) *outbox.EnqueueResult {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	res, err := e.ob.Enqueue(context.Background(), outbox.EnqueueParams{TenantID: e.tenant, Key: key, Tool: tool, Args: raw})
	require.NoError(t, err)
	return res
}

// wait polls the op until it is settled or unknown.
func (e *e2e) wait(t *testing.T, key string) *outbox.Op {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		op, err := e.ob.Get(context.Background(), e.tenant, key)
		require.NoError(t, err)
		if op.Status.Settled() || op.Status == protocol.StatusUnknown {
			return op
		}
		if time.Now().After(deadline) {
			t.Fatalf("op %s still %s after 15s", key, op.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// warm opens a kept-alive connection to the fake for the next POST to reuse.
func (e *e2e) warm(t *testing.T) {
	t.Helper()
	_, err := e.v.ListObjects(context.Background(), time.Now().Add(-time.Minute), time.Now())
	require.NoError(t, err)
}

// errorJSON is the op's stored error.
type errorJSON struct {
	Class      string          `json:"class"`
	Code       string          `json:"code"`
	Message    string          `json:"message"`
	HTTPStatus int             `json:"http_status"`
	Vendor     json.RawMessage `json:"vendor"`
}

func opError(t *testing.T, op *outbox.Op) errorJSON {
	t.Helper()
	var e errorJSON
	require.NoError(t, json.Unmarshal(op.Error, &e), "op error %s", op.Error)
	return e
}

func TestE2EDialFailureIsRetriedAndSucceeds(t *testing.T) {
	t.Parallel()
	var dials atomic.Int32
	e := newE2E(t, harnessOpts{adjust: func(c *stripe.Config) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) == 1 {
				return nil, errors.New("connection refused (test)")
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		t.Cleanup(tr.CloseIdleConnections)
		c.HTTPClient = &http.Client{Transport: tr}
	}})
	e.enqueue(t, "pi-dial", protocol.ToolPaymentIntent, piArgs(1000, "pm_card_visa"))
	op := e.wait(t, "pi-dial")
	require.Equal(t, protocol.StatusSucceeded, op.Status, "error: %s", op.Error)
	require.Equal(t, 2, op.Attempts)
	require.Equal(t, 1, e.fake.Requests(), "the first attempt never reached Stripe")
	pis, _ := e.fake.ByTag(vendorapi.TagKey, op.ID)
	require.Len(t, pis, 1)
	require.Equal(t, 1, e.fake.CreatedCount())
	require.Equal(t, pis[0].ID, op.VendorRef)
}

func TestE2EDropBeforeCreateIsResent(t *testing.T) {
	t.Parallel()
	e := newE2E(t, harnessOpts{keepAlive: true})
	e.warm(t)
	e.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultDropBeforeCreate})
	e.enqueue(t, "pi-drop-before", protocol.ToolPaymentIntent, piArgs(1000, "pm_card_visa"))
	op := e.wait(t, "pi-drop-before")
	require.Equal(t, protocol.StatusSucceeded, op.Status, "error: %s", op.Error)
	require.Equal(t, 2, e.fake.Requests(), "net/http resent the POST on a fresh connection, same key")
	pis, _ := e.fake.ByTag(vendorapi.TagKey, op.ID)
	require.Len(t, pis, 1)
	require.Equal(t, 1, e.fake.CreatedCount())
	require.Equal(t, pis[0].ID, op.VendorRef)
}

func TestE2EDropBeforeCreateIsResentUnderTheSameKey(t *testing.T) {
	t.Parallel()
	e := newE2E(t, harnessOpts{}) // One connection per request: net/http resends nothing.
	e.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultDropBeforeCreate})
	e.enqueue(t, "pi-drop-before-nk", protocol.ToolPaymentIntent, piArgs(1000, "pm_card_visa"))
	op := e.wait(t, "pi-drop-before-nk")
	// The request was written whole, so the adapter cannot tell this drop from
	// one after the create; inside Stripe's 24 h key window the worker resends
	// under the same key, which creates it now.
	require.Equal(t, protocol.StatusSucceeded, op.Status, "error: %s", op.Error)
	require.Equal(t, 2, op.Attempts)
	require.Equal(t, 1, e.fake.CreatedCount())
	require.Equal(t, 2, e.fake.Requests())
}

func TestE2EDropAfterCreate(t *testing.T) {
	t.Parallel()
	t.Run("kept-alive connection: resent by net/http and replayed", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, harnessOpts{keepAlive: true})
		e.warm(t)
		e.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultDropAfterCreate})
		e.enqueue(t, "pi-drop-after", protocol.ToolPaymentIntent, piArgs(1000, "pm_card_visa"))
		op := e.wait(t, "pi-drop-after")
		require.Equal(t, protocol.StatusSucceeded, op.Status, "error: %s", op.Error)
		require.Equal(t, 1, e.fake.CreatedCount())
		require.Equal(t, 2, e.fake.Requests())
		pis, _ := e.fake.ByTag(vendorapi.TagKey, op.ID)
		require.Len(t, pis, 1)
		require.Equal(t, pis[0].ID, op.VendorRef)
	})
	t.Run("own connection: resent by the worker under the same key and replayed", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, harnessOpts{})
		e.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultDropAfterCreate})
		e.enqueue(t, "pi-drop-after-nk", protocol.ToolPaymentIntent, piArgs(1000, "pm_card_visa"))
		op := e.wait(t, "pi-drop-after-nk")
		require.Equal(t, protocol.StatusSucceeded, op.Status, "error: %s", op.Error)
		require.Equal(t, 2, op.Attempts)
		require.Equal(t, 1, e.fake.CreatedCount())
		require.Equal(t, 2, e.fake.Requests())
		pis, _ := e.fake.ByTag(vendorapi.TagKey, op.ID)
		require.Len(t, pis, 1)
		require.Equal(t, pis[0].ID, op.VendorRef)
		res, err := e.v.Lookup(context.Background(), vendorapi.LookupParams{OpID: op.ID, Tool: op.Tool, Args: op.Args,
			Since: op.CreatedAt})
		require.NoError(t, err)
		require.Len(t, res.Objects, 1)
		require.Equal(t, pis[0].ID, res.Objects[0].ID)
	})
}

func TestE2ETwoPartialRefundsOfOnePaymentIntent(t *testing.T) {
	t.Parallel()
	e := newE2E(t, harnessOpts{keepAlive: true})
	e.fake.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_paid", Amount: 1000})
	// Made outside oncebox: the tenant adopts it, so that its refunds are admitted.
	_, err := e.pool.Exec(context.Background(), `INSERT INTO oncebox_tenant_object (tenant_id, vendor, object_id, adopted_by) VALUES ($1, 'stripe', 'pi_paid', 'test')`, e.tenant)
	require.NoError(t, err)
	e.warm(t)
	// The first refund's answer is lost once; the same key is resent.
	e.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultDropAfterCreate, Path: "/v1/refunds"})
	e.enqueue(t, "refund-1", protocol.ToolRefund, map[string]any{"payment_intent": "pi_paid", "amount": 300})
	op1 := e.wait(t, "refund-1")
	require.Equal(t, protocol.StatusSucceeded, op1.Status, "error: %s", op1.Error)
	e.enqueue(t, "refund-2", protocol.ToolRefund, map[string]any{"payment_intent": "pi_paid", "amount": 200})
	op2 := e.wait(t, "refund-2")
	require.Equal(t, protocol.StatusSucceeded, op2.Status, "error: %s", op2.Error)

	refunds := e.fake.Refunds()
	require.Len(t, refunds, 2)
	byOp := map[string]int64{}
	for _, r := range refunds {
		byOp[r.Metadata[vendorapi.TagKey]] += r.Amount
	}
	require.Equal(t, map[string]int64{op1.ID: 300, op2.ID: 200}, byOp)
	require.EqualValues(t, 500, e.fake.PaymentIntents()[0].AmountRefunded)
	require.Len(t, e.rec.posts("/v1/refunds"), 3, "the first refund was sent twice under one key")
	require.NotEqual(t, op1.VendorRef, op2.VendorRef)
}

func TestE2EDeclineFailsAndIsReplayed(t *testing.T) {
	t.Parallel()
	e := newE2E(t, harnessOpts{})
	args := piArgs(1000, "pm_card_chargeDeclined")
	e.enqueue(t, "pi-decline", protocol.ToolPaymentIntent, args)
	op := e.wait(t, "pi-decline")
	require.Equal(t, protocol.StatusFailed, op.Status)
	oe := opError(t, op)
	require.Equal(t, "permanent", oe.Class)
	require.Equal(t, "generic_decline", oe.Code)
	require.Equal(t, http.StatusPaymentRequired, oe.HTTPStatus)
	require.Contains(t, string(oe.Vendor), "card_declined")
	requireNoSecret(t, string(op.Error))
	require.Equal(t, 1, e.fake.Requests())

	again := e.enqueue(t, "pi-decline", protocol.ToolPaymentIntent, args)
	require.True(t, again.Replayed)
	require.Equal(t, protocol.StatusFailed, again.Op.Status)
	require.JSONEq(t, string(op.Error), string(again.Op.Error))
	optest.WaitJobsFinished(t, e.pool, op.ID)
	require.Equal(t, 1, e.fake.Requests(), "a replay sends nothing")
}

func TestE2ERateLimitIsRetried(t *testing.T) {
	t.Parallel()
	e := newE2E(t, harnessOpts{})
	e.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.Fault429, RetryAfter: time.Second})
	start := time.Now()
	e.enqueue(t, "pi-429", protocol.ToolPaymentIntent, piArgs(1000, "pm_card_visa"))
	op := e.wait(t, "pi-429")
	require.Equal(t, protocol.StatusSucceeded, op.Status, "error: %s", op.Error)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "the retry waited for Retry-After")
	require.Equal(t, 2, op.Attempts)
	require.Equal(t, 2, e.fake.Requests())
	require.Equal(t, 1, e.fake.CreatedCount())
}

func TestE2EKeyInUseIsRetried(t *testing.T) {
	t.Parallel()
	e := newE2E(t, harnessOpts{})
	e.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.Fault409})
	e.enqueue(t, "pi-409", protocol.ToolPaymentIntent, piArgs(1000, "pm_card_visa"))
	op := e.wait(t, "pi-409")
	require.Equal(t, protocol.StatusSucceeded, op.Status, "error: %s", op.Error)
	require.Equal(t, 2, op.Attempts)
	require.Equal(t, 2, e.fake.Requests())
	require.Equal(t, 1, e.fake.CreatedCount())
}

func TestE2EStored500IsUnknownAndNotResent(t *testing.T) {
	t.Parallel()
	e := newE2E(t, harnessOpts{})
	e.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultStored500})
	e.enqueue(t, "pi-500", protocol.ToolPaymentIntent, piArgs(1000, "pm_card_visa"))
	op := e.wait(t, "pi-500")
	require.Equal(t, protocol.StatusUnknown, op.Status)
	require.Equal(t, http.StatusInternalServerError, opError(t, op).HTTPStatus)
	optest.WaitJobsFinished(t, e.pool, op.ID)
	op, err := e.ob.Get(context.Background(), e.tenant, "pi-500")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusUnknown, op.Status)
	require.Equal(t, 1, op.Attempts)
	require.Equal(t, 1, e.fake.Requests(), "not resent")
	require.Equal(t, 0, e.fake.CreatedCount())
}

func TestE2EIdempotencyErrorNeedsReview(t *testing.T) {
	t.Parallel()
	e := newE2E(t, harnessOpts{})
	// Seed Stripe with the op's vendor key and other parameters.
	b := stripego.GetBackendWithConfig(stripego.APIBackend, &stripego.BackendConfig{
		URL: stripego.String(e.srv.URL), HTTPClient: e.srv.Client(), MaxNetworkRetries: stripego.Int64(0),
		LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
	})
	sc := client.New(testKey, &stripego.Backends{API: b, Connect: b, Uploads: b})
	seed := &stripego.PaymentIntentParams{Amount: stripego.Int64(1), Currency: stripego.String("usd")}
	seed.SetIdempotencyKey(vendorapi.VendorKey(e.tenant, "pi-idem", protocol.ToolPaymentIntent, 0))
	_, err := sc.PaymentIntents.New(seed)
	require.NoError(t, err)

	e.enqueue(t, "pi-idem", protocol.ToolPaymentIntent, piArgs(1000, "pm_card_visa"))
	op := e.wait(t, "pi-idem")
	require.Equal(t, protocol.StatusNeedsReview, op.Status)
	oe := opError(t, op)
	require.Equal(t, "idempotency_error", oe.Code)
	require.Contains(t, oe.Message, "bug in oncebox")
	optest.WaitJobsFinished(t, e.pool, op.ID)
	op, err = e.ob.Get(context.Background(), e.tenant, "pi-idem")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusNeedsReview, op.Status)
	require.Equal(t, 1, op.Attempts)
	require.Equal(t, 2, e.fake.Requests(), "the seed and one attempt; not retried")
	require.Equal(t, 1, e.fake.CreatedCount(), "only the seed")
}
