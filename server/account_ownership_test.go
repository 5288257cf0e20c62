package server_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripego "github.com/stripe/stripe-go/v79"
	stripeclient "github.com/stripe/stripe-go/v79/client"

	"github.com/oncebox/oncebox/cells"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendoraccount"
)

// newAccountStripe is a server over the fake Stripe, with a seal key, a worker and the
// named tenants (their agent tokens returned in order), and its vendor settings.
func newAccountStripe(t *testing.T, names ...string) (*ownedStripe, []string, *vendoraccount.Settings, map[string]int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o := &ownedStripe{fake: fakestripe.New(fakestripe.Config{})}
	srv := httptest.NewServer(o.fake)
	t.Cleanup(srv.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.Roles = server.Roles{API: true, Worker: true}
	cfg.SealKey = testSealKey()
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_platform", srv.URL
	_, o.base = runServer(t, ctx, cfg)
	o.pool = pool
	seal, err := base64.StdEncoding.DecodeString(cfg.SealKey)
	require.NoError(t, err)
	settings, err := vendoraccount.New(pool, seal)
	require.NoError(t, err)
	tokens, ids := make([]string, len(names)), map[string]int64{}
	for i, name := range names {
		tn, token, err := tenant.NewStore(pool).Create(ctx, name)
		require.NoError(t, err)
		tokens[i], ids[name] = token, tn.ID
	}
	b := stripego.GetBackendWithConfig(stripego.APIBackend, &stripego.BackendConfig{URL: stripego.String(srv.URL),
		LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull}})
	o.sdk = stripeclient.New("sk_test_platform", &stripego.Backends{API: b, Connect: b, Uploads: b})
	return o, tokens, settings, ids
}

// paidOutside makes a payment outside oncebox, on the Connect account acct ("" for the
// platform's own).
func (o *ownedStripe) paidOutside(t *testing.T, acct string) string {
	t.Helper()
	p := &stripego.PaymentIntentParams{Amount: stripego.Int64(1500), Currency: stripego.String("usd"),
		PaymentMethod: stripego.String("pm_card_visa"), Confirm: stripego.Bool(true)}
	if acct != "" {
		p.SetStripeAccount(acct)
	}
	pi, err := o.sdk.PaymentIntents.New(p)
	require.NoError(t, err)
	return pi.ID
}

// TestOwnAccountObjectsNeedNoAdoption: a tenant on its own Connect account, or on its
// own Stripe key, refunds a payment its own checkout made in that account without
// adopting it, and the refund reaches that account; a tenant on the installation's
// account still cannot name it, and two tenants sharing one account (--shared) must
// still adopt, since the account no longer keeps them apart.
func TestOwnAccountObjectsNeedNoAdoption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, tokens, settings, ids := newAccountStripe(t, "acme", "globex", "initech", "hooli")
	acme, globex, initech, hooli := tokens[0], tokens[1], tokens[2], tokens[3]
	connect := o.fake.AddAccount("acct_Acme1")
	own := o.fake.AddAccount("acct_Initech1", "sk_test_initech_own")
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: ids["acme"], Vendor: "stripe", Account: "acct_Acme1", By: "test"}))
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: ids["initech"], Vendor: "stripe", APIKey: "sk_test_initech_own", By: "test"}))

	pi := o.paidOutside(t, "acct_Acme1")
	status, _, out := o.refund(t, globex, "steal-1", "payment_intent", pi)
	requireNotOwned(t, status, out, "payment_intent", pi)
	status, _, out = o.call(t, http.MethodPost, "/v1/ops?wait=20s", acme, "refund-own-1", `{"tool": "stripe.refund", "args": {"payment_intent": "`+pi+`"}}`)
	require.Equal(t, http.StatusAccepted, status, out)
	require.Equal(t, "succeeded", out["status"], out)
	require.Len(t, connect.Refunds(), 1, "the refund reached acme's own account")
	require.Equal(t, pi, connect.Refunds()[0].PaymentIntent)

	ownPI := o.paidOutside(t, "acct_Initech1")
	status, _, out = o.call(t, http.MethodPost, "/v1/ops?wait=20s", initech, "refund-own-2", `{"tool": "stripe.refund", "args": {"payment_intent": "`+ownPI+`"}}`)
	require.Equal(t, http.StatusAccepted, status, out)
	require.Equal(t, "succeeded", out["status"], out)
	require.Len(t, own.Refunds(), 1, "the refund reached initech's own account, with its own key")

	// hooli shares acme's account on purpose: neither owns its objects wholesale now.
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: ids["hooli"], Vendor: "stripe", Account: "acct_Acme1", By: "test", Shared: true}))
	pi2 := o.paidOutside(t, "acct_Acme1")
	status, _, out = o.refund(t, acme, "refund-shared-1", "payment_intent", pi2)
	requireNotOwned(t, status, out, "payment_intent", pi2)
	status, _, out = o.refund(t, hooli, "refund-shared-2", "payment_intent", pi2)
	requireNotOwned(t, status, out, "payment_intent", pi2)
	require.Len(t, connect.Refunds(), 1)
	require.Empty(t, o.fake.Refunds(), "nothing reached the installation's account")
}

// TestOnlyTenantOwnsTheInstallationAccountByClaim: on the installation's account, a
// payment made outside oncebox needs adoption until the only tenant claims the account
// (recorded with who and when); the claim is refused while two tenants exist, and
// stops counting once a second tenant is created.
func TestOnlyTenantOwnsTheInstallationAccountByClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, tokens, settings, ids := newAccountStripe(t, "solo")
	solo := tokens[0]
	pi := o.paidOutside(t, "")
	status, _, out := o.refund(t, solo, "refund-1", "payment_intent", pi)
	requireNotOwned(t, status, out, "payment_intent", pi)

	require.NoError(t, settings.Own(ctx, ids["solo"], "stripe", "cli:alice"))
	owners, err := settings.Owners(ctx, 0)
	require.NoError(t, err)
	require.Len(t, owners, 1)
	require.Equal(t, "cli:alice", owners[0].OwnedBy)
	require.True(t, owners[0].InForce)
	require.WithinDuration(t, time.Now(), owners[0].OwnedAt, time.Minute)
	status, _, out = o.call(t, http.MethodPost, "/v1/ops?wait=20s", solo, "refund-1", `{"tool": "stripe.refund", "args": {"payment_intent": "`+pi+`"}}`)
	require.Equal(t, http.StatusAccepted, status, out)
	require.Equal(t, "succeeded", out["status"], out)
	require.Len(t, o.fake.Refunds(), 1)

	other, otherToken, err := tenant.NewStore(o.pool).Create(ctx, "second")
	require.NoError(t, err)
	require.ErrorIs(t, settings.Own(ctx, other.ID, "stripe", "cli:bob"), vendoraccount.ErrNotOnlyTenant)
	pi2 := o.paidOutside(t, "")
	status, _, out = o.refund(t, solo, "refund-2", "payment_intent", pi2)
	requireNotOwned(t, status, out, "payment_intent", pi2)
	status, _, out = o.refund(t, otherToken, "refund-3", "payment_intent", pi2)
	requireNotOwned(t, status, out, "payment_intent", pi2)
	owners, err = settings.Owners(ctx, ids["solo"])
	require.NoError(t, err)
	require.False(t, owners[0].InForce, "a second tenant ends the claim")
	require.Len(t, o.fake.Refunds(), 1)
}

// TestAnAccountTakenOverKeepsThePreviousTenantsObjects: a Connect account that was
// globex's (its setting since deleted) is set on acme; acme owns the account's objects
// wholesale, but not the payment globex's op made there nor the one globex adopted.
func TestAnAccountTakenOverKeepsThePreviousTenantsObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, tokens, settings, ids := newAccountStripe(t, "acme", "globex")
	acme, globex := tokens[0], tokens[1]
	connect := o.fake.AddAccount("acct_Globex1")
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: ids["globex"], Vendor: "stripe", Account: "acct_Globex1", By: "test"}))
	status, _, out := o.call(t, http.MethodPost, "/v1/ops?wait=20s", globex, "pay-1",
		`{"tool": "stripe.payment_intent", "args": {"amount": 1500, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}}`)
	require.Equal(t, http.StatusAccepted, status, out)
	require.Equal(t, "succeeded", out["status"], out)
	made, _ := out["vendor_ref"].(string)
	require.NotEmpty(t, made, out)
	adopted := o.paidOutside(t, "acct_Globex1")
	_, err := tenant.NewStore(o.pool).Adopt(ctx, "globex", "stripe", []string{adopted}, "test")
	require.NoError(t, err)

	deleted, err := settings.Delete(ctx, ids["globex"], "stripe")
	require.NoError(t, err)
	require.True(t, deleted)
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: ids["acme"], Vendor: "stripe", Account: "acct_Globex1", By: "test"}))
	for i, pi := range []string{made, adopted} {
		status, _, out = o.refund(t, acme, fmt.Sprintf("steal-%d", i), "payment_intent", pi)
		requireNotOwned(t, status, out, "payment_intent", pi)
	}
	mine := o.paidOutside(t, "acct_Globex1")
	status, _, out = o.call(t, http.MethodPost, "/v1/ops?wait=20s", acme, "refund-mine", `{"tool": "stripe.refund", "args": {"payment_intent": "`+mine+`"}}`)
	require.Equal(t, http.StatusAccepted, status, out)
	require.Len(t, connect.Refunds(), 1, "only acme's own payment was refunded")
	require.Equal(t, mine, connect.Refunds()[0].PaymentIntent)
}

// TestACellEndsTheClaimOnTheInstallationAccount: the only tenant's claim on the
// installation's account stops counting once the installation has a second cell, whose
// tenants the home cell cannot count and whose payments on that account would otherwise
// be the claimant's to refund.
func TestACellEndsTheClaimOnTheInstallationAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, tokens, settings, ids := newAccountStripe(t, "solo")
	solo := tokens[0]
	require.NoError(t, settings.Own(ctx, ids["solo"], "stripe", "cli:alice"))
	pi := o.paidOutside(t, "")
	status, _, out := o.call(t, http.MethodPost, "/v1/ops?wait=20s", solo, "refund-1", `{"tool": "stripe.refund", "args": {"payment_intent": "`+pi+`"}}`)
	require.Equal(t, http.StatusAccepted, status, out)

	_, err := cells.AddCell(ctx, o.pool, dbtest.Schema(t), "eu")
	require.NoError(t, err)
	pi2 := o.paidOutside(t, "")
	status, _, out = o.refund(t, solo, "refund-2", "payment_intent", pi2)
	requireNotOwned(t, status, out, "payment_intent", pi2)
	owners, err := settings.Owners(ctx, ids["solo"])
	require.NoError(t, err)
	require.False(t, owners[0].InForce, "a second cell ends the claim")
	require.Len(t, o.fake.Refunds(), 1)
}
