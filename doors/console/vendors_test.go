package console_test

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendoraccount"
)

// vendorUses returns the "uses" cell of the Vendors page's row of vendor.
func vendorUses(t *testing.T, page, vendor string) string {
	t.Helper()
	row := regexp.MustCompile(`(?s)<tr data-vendor="` + regexp.QuoteMeta(vendor) + `"[^>]*>.*?<td class="uses"[^>]*>(.*?)</td>(.*?)</tr>`).FindStringSubmatch(page)
	require.NotNil(t, row, "a row of %s in %s", vendor, page)
	return row[1] + row[2]
}

// TestVendorsPage: an admin's Vendors page shows the tenant's Stripe Connect account,
// its own SendGrid key by fingerprint and last 4 characters (never the key), who set
// each, and "the installation's account" once a setting is deleted; another tenant's
// settings never appear; an approver has no Vendors link and gets 403 forbidden.
func TestVendorsPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := start(t)
	settings, err := vendoraccount.New(e.pool, bytes.Repeat([]byte{7}, seal.KeySize))
	require.NoError(t, err)
	const sentinel = "SG.sentinel-KEY-must-never-show.q9Zx"
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: e.tenant.ID, Vendor: "stripe", Account: "acct_1AcmeConnected", By: "cli:alice"}))
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: e.tenant.ID, Vendor: "sendgrid", APIKey: sentinel, By: "cli:bob"}))
	store := tenant.NewStore(e.pool)
	other, _, err := store.Create(ctx, "globex")
	require.NoError(t, err)
	const otherKey = "SG.globex-own-key-of-another-tenant.Wv3k"
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: other.ID, Vendor: "stripe", Account: "acct_9GlobexOnly", By: "cli:carol"}))
	require.NoError(t, settings.Set(ctx, vendoraccount.SetParams{TenantID: other.ID, Vendor: "sendgrid", APIKey: otherKey, By: "cli:carol"}))

	admin, err := store.NewTokenWithRole(ctx, "acme", tenant.RoleAdmin)
	require.NoError(t, err)
	b := newBrowser(t, e.base)
	_, home := b.signIn(admin)
	require.Contains(t, home, `href="/console/vendors"`)
	resp, page := b.get("/console/vendors")
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	stripe := vendorUses(t, page, "stripe")
	require.Contains(t, stripe, `Connect account <code class="account">acct_1AcmeConnected</code>`)
	require.Contains(t, stripe, "cli:alice")
	sendgrid := vendorUses(t, page, "sendgrid")
	require.Contains(t, sendgrid, `its own key <code class="fingerprint">`+vendoraccount.KeyFingerprint(sentinel)+`</code> <code class="last4">…q9Zx</code>`)
	require.Contains(t, sendgrid, "cli:bob")
	require.NotContains(t, page, sentinel)
	require.NotContains(t, page, "sentinel-KEY", "no part of the key but its last 4 characters")
	for _, theirs := range []string{"acct_9GlobexOnly", vendoraccount.KeyFingerprint(otherKey), "Wv3k", "cli:carol", "globex"} {
		require.NotContains(t, page, theirs, "another tenant's setting")
	}

	deleted, err := settings.Delete(ctx, e.tenant.ID, "stripe")
	require.NoError(t, err)
	require.True(t, deleted)
	_, page = b.get("/console/vendors")
	stripe = vendorUses(t, page, "stripe")
	require.Contains(t, stripe, "the installation's account")
	require.NotContains(t, stripe, "acct_1AcmeConnected")
	require.NotContains(t, stripe, "cli:alice")

	ab := newBrowser(t, e.base)
	_, home = ab.signIn(e.approver)
	require.NotContains(t, home, `href="/console/vendors"`, "an approver has no Vendors link")
	resp, page = ab.get("/console/vendors")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "forbidden", reasonOf(page))
	require.Contains(t, page, "the Vendors page needs an admin token")
	require.NotContains(t, page, "q9Zx")
}

// TestVendorsPageShowsTheClaimOnTheInstallationAccount: the only tenant's claim on the
// installation's Stripe account shows on its Vendors page with who made it; once a
// second tenant exists the page says the claim is not in force.
func TestVendorsPageShowsTheClaimOnTheInstallationAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := start(t)
	settings, err := vendoraccount.New(e.pool, nil)
	require.NoError(t, err)
	require.NoError(t, settings.Own(ctx, e.tenant.ID, "stripe", "cli:alice"))
	store := tenant.NewStore(e.pool)
	admin, err := store.NewTokenWithRole(ctx, e.tenant.Name, tenant.RoleAdmin)
	require.NoError(t, err)
	b := newBrowser(t, e.base)
	b.signIn(admin)
	_, page := b.get("/console/vendors")
	stripe := vendorUses(t, page, "stripe")
	require.Contains(t, stripe, "the installation's account")
	require.Contains(t, stripe, "owned by this tenant: objects made there outside oncebox need no adoption")
	require.Contains(t, stripe, "claimed by cli:alice")

	_, _, err = store.Create(ctx, "globex")
	require.NoError(t, err)
	_, page = b.get("/console/vendors")
	require.Contains(t, vendorUses(t, page, "stripe"), "not in force: other tenants exist")
}
