package outbox_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/testkit/testlog"
	"github.com/oncebox/oncebox/vendoraccount"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/sendgrid"
)

// accountEnv is an optest.Env with a seal key, a log buffer and a second tenant.
type accountEnv struct {
	*optest.Env
	logs *testlog.Buffer
	b    int64
}

func newAccountEnv(t *testing.T, vendors ...vendorapi.Vendor) *accountEnv {
	t.Helper()
	key := make([]byte, seal.KeySize)
	_, _ = rand.Read(key)
	logs := &testlog.Buffer{}
	e := optest.NewEnv(t, outbox.Config{SealKey: key,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, vendors...)
	return &accountEnv{Env: e, logs: logs, b: optest.Tenant(t, e.Pool, "beta")}
}

func (e *accountEnv) set(t *testing.T, tenant int64, vendor, account, key string) {
	t.Helper()
	require.NoError(t, e.Ob.VendorSettings().Set(context.Background(),
		vendoraccount.SetParams{TenantID: tenant, Vendor: vendor, Account: account, APIKey: key, By: "test"}))
}

// tags returns the op ids the payment intents of one account of the fake are tagged with.
func tags(s *fakestripe.Server) []string {
	var out []string
	for _, pi := range s.PaymentIntents() {
		out = append(out, pi.Metadata[vendorapi.TagKey])
	}
	return out
}

// TestConnectTenantsChargeOnTheirOwnAccounts: a tenant with a Connect account is charged
// on it (Stripe-Account, so the fake's per-account state holds it), another on its own,
// one without settings on the platform; moving a tenant to another account applies to
// its next op, without a restart.
func TestConnectTenantsChargeOnTheirOwnAccounts(t *testing.T) {
	t.Parallel()
	fake, v := optest.StripeFake(t)
	accA, accB, accC := fake.AddAccount("acct_A"), fake.AddAccount("acct_B"), fake.AddAccount("acct_C")
	e := newAccountEnv(t, v)
	e.Start(t)
	e.set(t, e.Tenant, "stripe", "acct_A", "")
	e.set(t, e.b, "stripe", "acct_B", "")

	a := e.Enqueue(t, "pay-a", protocol.ToolPaymentIntent, optest.PaymentArgs(1000))
	b := optest.Enqueue(t, e.Ob, e.b, "pay-b", protocol.ToolPaymentIntent, optest.PaymentArgs(2000))
	require.Equal(t, "acct_A", a.VendorAccount, "the op records its tenant's account at enqueue")
	require.Equal(t, "acct_B", b.VendorAccount)
	e.WaitStatus(t, a.ID, protocol.StatusSucceeded)
	optest.WaitStatus(t, e.Pool, e.Ob, e.b, b.ID, protocol.StatusSucceeded)
	require.Equal(t, []string{a.ID}, tags(accA))
	require.Equal(t, []string{b.ID}, tags(accB))
	require.Empty(t, fake.PaymentIntents(), "nothing on the platform's own account")

	// A payment intent of acct_A is not found from acct_B.
	_, err := v.PaymentIntentTag(vendorapi.WithAccount(context.Background(), vendorapi.Account{Ref: "acct_B"}), accA.PaymentIntents()[0].ID)
	require.NoError(t, err)
	tag, err := v.PaymentIntentTag(vendorapi.WithAccount(context.Background(), vendorapi.Account{Ref: "acct_A"}), accA.PaymentIntents()[0].ID)
	require.NoError(t, err)
	require.Equal(t, a.ID, tag)

	// Moved to acct_C: the running Outbox's next op goes there.
	e.set(t, e.Tenant, "stripe", "acct_C", "")
	next := e.Enqueue(t, "pay-a2", protocol.ToolPaymentIntent, optest.PaymentArgs(1100))
	e.WaitStatus(t, next.ID, protocol.StatusSucceeded)
	require.Equal(t, []string{next.ID}, tags(accC))
	require.Equal(t, []string{a.ID}, tags(accA))

	// Without settings: the platform again.
	deleted, err := e.Ob.VendorSettings().Delete(context.Background(), e.Tenant, "stripe")
	require.NoError(t, err)
	require.True(t, deleted)
	plain := e.Enqueue(t, "pay-a3", protocol.ToolPaymentIntent, optest.PaymentArgs(1200))
	require.Empty(t, plain.VendorAccount)
	e.WaitStatus(t, plain.ID, protocol.StatusSucceeded)
	require.Equal(t, []string{plain.ID}, tags(fake))
}

// TestAnOpKeepsTheAccountItWasAcceptedUnder: an op accepted under acct_A whose answer
// is lost is dispatched on acct_A and reconciled there after its tenant moved to acct_C.
func TestAnOpKeepsTheAccountItWasAcceptedUnder(t *testing.T) {
	t.Parallel()
	fake, v := optest.StripeFake(t)
	accA, accC := fake.AddAccount("acct_A"), fake.AddAccount("acct_C")
	e := newAccountEnv(t, v)
	e.set(t, e.Tenant, "stripe", "acct_A", "")

	op := e.Enqueue(t, "pay-1", protocol.ToolPaymentIntent, optest.PaymentArgs(1500))
	_, err := e.Pool.Exec(context.Background(), "UPDATE oncebox_op SET key_first_sent_at = now() - interval '25 hours' WHERE id = $1", op.ID)
	require.NoError(t, err)
	accA.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultDropAfterCreate, Path: "/v1/payment_intents"})
	e.set(t, e.Tenant, "stripe", "acct_C", "") // Before the op is even sent.
	e.Start(t)
	e.WaitStatus(t, op.ID, protocol.StatusUnknown)
	require.Equal(t, 1, accA.CreatedCount(), "dispatched on the account it was accepted under")
	accA.ExpireIdempotencyKeys()

	st := e.Reconcile(t)
	require.Equal(t, 1, st.Succeeded, "the reconciler looks on acct_A, where the object is")
	got := e.Get(t, op.ID)
	require.Equal(t, accA.PaymentIntents()[0].ID, got.VendorRef)
	require.Zero(t, accC.CreatedCount())
	require.Zero(t, fake.CreatedCount())
}

// TestOwnStripeKeyIsUsedAndNeverShown: a tenant with its own secret key is charged with
// it; the key shows in no log line, op, error, listing or unsealed column.
func TestOwnStripeKeyIsUsedAndNeverShown(t *testing.T) {
	t.Parallel()
	const sentinel = "sk_test_SENTINEL_own_key_7d1c0ffee"
	fake, v := optest.StripeFake(t)
	own := fake.AddAccount("acct_own", sentinel)
	e := newAccountEnv(t, v)
	e.Start(t)
	e.set(t, e.Tenant, "stripe", "", sentinel)

	ok := e.Enqueue(t, "pay-own", protocol.ToolPaymentIntent, optest.PaymentArgs(700))
	require.Equal(t, vendorapi.KeyRefPrefix+vendoraccount.KeyFingerprint(sentinel), ok.VendorAccount)
	e.WaitStatus(t, ok.ID, protocol.StatusSucceeded)
	require.Equal(t, []string{ok.ID}, tags(own), "sent with the tenant's key, so on its account")
	declined := e.Enqueue(t, "pay-declined", protocol.ToolPaymentIntent,
		map[string]any{"amount": 700, "currency": "usd", "payment_method": "pm_card_chargeDeclined", "confirm": true})
	e.WaitStatus(t, declined.ID, protocol.StatusFailed)

	list, err := e.Ob.VendorSettings().List(context.Background(), e.Tenant)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, vendoraccount.KeyFingerprint(sentinel), list[0].KeyFingerprint)
	require.Equal(t, "…ffee", list[0].KeyHint)
	require.Empty(t, list[0].Account)
	require.NotContains(t, e.logs.String(), sentinel)
	require.Zero(t, e.Count(t, `SELECT count(*) FROM oncebox_op o WHERE row_to_json(o)::text LIKE '%SENTINEL%'`))
	require.Zero(t, e.Count(t, `SELECT count(*) FROM oncebox_tenant_vendor v WHERE row_to_json(v)::text LIKE '%SENTINEL%'`))
	require.Zero(t, e.Count(t, `SELECT count(*) FROM oncebox_tenant_vendor_key WHERE position('SENTINEL'::bytea IN sealed) > 0`))
	require.Equal(t, 1, e.Count(t, `SELECT count(*) FROM oncebox_tenant_vendor_key`))

	// Another key: the old one is kept no longer than an unsettled op needs it.
	e.set(t, e.Tenant, "stripe", "", sentinel+"2")
	require.Equal(t, 1, e.Count(t, `SELECT count(*) FROM oncebox_tenant_vendor_key`))
}

// TestSendGridSubuserSendsWithItsKeyAndIsFoundWithIt: a tenant with a subuser's key
// sends its mail with that key (the fake keeps it apart from the parent's), and the
// reconciler finds a lost answer's message with the same key.
func TestSendGridSubuserSendsWithItsKeyAndIsFoundWithIt(t *testing.T) {
	t.Parallel()
	const subKey = "SG.SENTINEL_subuser_key_a"
	fake := fakesendgrid.New(fakesendgrid.Config{ActivityRatePerMinute: -1})
	sub := fake.AddSubuser("tenant-a", subKey)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	v, err := sendgrid.New(sendgrid.Config{APIKey: "SG.parent", BaseURL: srv.URL, Timeout: 2 * time.Second,
		ActivityRatePerMinute: -1, LookupLag: 200 * time.Millisecond})
	require.NoError(t, err)
	e := newAccountEnv(t, v)
	e.Start(t)
	e.set(t, e.Tenant, "sendgrid", "", subKey)

	sub.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.FaultAcceptThenDrop})
	op := e.Enqueue(t, "mail-a", protocol.ToolMail, optest.MailArgs())
	e.WaitStatus(t, op.ID, protocol.StatusUnknown)
	require.Len(t, sub.ByCustomArg(vendorapi.TagKey, op.ID), 1, "sent with the subuser's key")
	require.Empty(t, fake.Messages(), "nothing in the parent's account")

	// The parent's key does not see the subuser's message; the op's key does.
	res, err := v.Lookup(context.Background(), vendorapi.LookupParams{OpID: op.ID, Tool: protocol.ToolMail})
	require.NoError(t, err)
	require.Empty(t, res.Objects)
	time.Sleep(300 * time.Millisecond) // The vendor's lookup lag.
	st := e.Reconcile(t)
	require.Equal(t, 1, st.Succeeded, "the reconciler asked with the subuser's key: %+v", st)
	require.Equal(t, protocol.StatusSucceeded, e.Get(t, op.ID).Status)
	require.NotContains(t, e.logs.String(), subKey)

	// B's mail, without settings, goes out with the parent's key.
	b := optest.Enqueue(t, e.Ob, e.b, "mail-b", protocol.ToolMail, optest.MailArgs())
	optest.WaitStatus(t, e.Pool, e.Ob, e.b, b.ID, protocol.StatusSucceeded)
	require.Len(t, fake.ByCustomArg(vendorapi.TagKey, b.ID), 1)
	require.Empty(t, sub.ByCustomArg(vendorapi.TagKey, b.ID))
}
