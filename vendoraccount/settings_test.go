package vendoraccount_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendoraccount"
	"github.com/oncebox/oncebox/vendorapi"
)

func tenant(t *testing.T, pool *pgxpool.Pool, name string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), "INSERT INTO oncebox_tenant (name) VALUES ($1) RETURNING id", name).Scan(&id))
	return id
}

// TestKeyIsStoredSealedAndOpened: a tenant's own key is stored only sealed, listed by its
// fingerprint and hint, and opened again for the ref an op records; settings opened
// with another seal key cannot open it.
func TestKeyIsStoredSealedAndOpened(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	acme := tenant(t, pool, "acme")
	s, err := vendoraccount.New(pool, bytes.Repeat([]byte{7}, seal.KeySize))
	require.NoError(t, err)
	const key = "sk_test_acme_own_key_1234"
	require.NoError(t, s.Set(ctx, vendoraccount.SetParams{TenantID: acme, Vendor: "stripe", APIKey: key, By: "test"}))
	require.Zero(t, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_tenant_vendor_key WHERE position($1::bytea IN sealed) > 0", []byte(key)))

	list, err := s.List(ctx, acme)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, vendoraccount.KeyFingerprint(key), list[0].KeyFingerprint)
	require.Equal(t, "…1234", list[0].KeyHint)
	require.Empty(t, list[0].Account)

	ref := vendorapi.KeyRefPrefix + vendoraccount.KeyFingerprint(key)
	acct, err := s.Account(ctx, acme, "stripe", ref)
	require.NoError(t, err)
	require.Equal(t, vendorapi.Account{Ref: ref, APIKey: key}, acct)
	secret, err := s.Secret(ctx, acme, "stripe")
	require.NoError(t, err)
	require.Equal(t, key, secret)

	other, err := vendoraccount.New(pool, bytes.Repeat([]byte{8}, seal.KeySize))
	require.NoError(t, err)
	_, err = other.Account(ctx, acme, "stripe", ref)
	require.ErrorIs(t, err, seal.ErrSealed)

	deleted, err := s.Delete(ctx, acme, "stripe")
	require.NoError(t, err)
	require.True(t, deleted)
	require.Zero(t, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_tenant_vendor_key WHERE tenant_id = $1", acme))
}

// TestAccountServesOneTenant: a Connect account is refused to a second tenant unless
// shared on purpose, and a setting is an account or a key, never both or neither.
func TestAccountServesOneTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	acme, globex := tenant(t, pool, "acme"), tenant(t, pool, "globex")
	s, err := vendoraccount.New(pool, nil)
	require.NoError(t, err)
	require.NoError(t, s.Set(ctx, vendoraccount.SetParams{TenantID: acme, Vendor: "stripe", Account: "acct_1", By: "test"}))
	err = s.Set(ctx, vendoraccount.SetParams{TenantID: globex, Vendor: "stripe", Account: "acct_1", By: "test"})
	require.ErrorIs(t, err, vendoraccount.ErrAccountTaken)
	require.NoError(t, s.Set(ctx, vendoraccount.SetParams{TenantID: globex, Vendor: "stripe", Account: "acct_1", By: "test", Shared: true}))
	id, err := s.TenantOfAccount(ctx, "stripe", "acct_1")
	require.NoError(t, err)
	require.Equal(t, acme, id)

	require.Error(t, s.Set(ctx, vendoraccount.SetParams{TenantID: acme, Vendor: "stripe", By: "test"}))
	require.Error(t, s.Set(ctx, vendoraccount.SetParams{TenantID: acme, Vendor: "stripe", Account: "acct_2", APIKey: "sk_x", By: "test"}))
	require.Error(t, s.Set(ctx, vendoraccount.SetParams{TenantID: acme, Vendor: "stripe", APIKey: "sk_test_1", By: "test"}),
		"without a seal key a key cannot be set")
}

// TestOwnOnlyWhileTheOnlyTenant: a claim on the installation's account is taken by the
// only tenant, stops being in force once another exists, and cannot be taken then.
func TestOwnOnlyWhileTheOnlyTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	acme := tenant(t, pool, "acme")
	s, err := vendoraccount.New(pool, nil)
	require.NoError(t, err)
	require.NoError(t, s.Own(ctx, acme, "stripe", "cli:alice"))
	owners, err := s.Owners(ctx, 0)
	require.NoError(t, err)
	require.Len(t, owners, 1)
	require.True(t, owners[0].InForce)

	globex := tenant(t, pool, "globex")
	owners, err = s.Owners(ctx, acme)
	require.NoError(t, err)
	require.False(t, owners[0].InForce)
	require.ErrorIs(t, s.Own(ctx, globex, "stripe", "cli:bob"), vendoraccount.ErrNotOnlyTenant)

	gone, err := s.Disown(ctx, acme, "stripe")
	require.NoError(t, err)
	require.True(t, gone)
}

// TestNoClaimInForceWithCells: in an installation of several cells a cell's only tenant
// is not the installation's: another cell's tenant may have objects in the
// installation's account, so a claim is neither taken nor in force, in the home cell
// once another cell is registered, and in every other cell.
func TestNoClaimInForceWithCells(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, mark := range []string{
		`INSERT INTO oncebox_cell (name, number) VALUES ('eu', 1)`,      // the home cell's directory
		`INSERT INTO oncebox_cell_self (name, number) VALUES ('eu', 1)`, // another cell
	} {
		pool := dbtest.Schema(t)
		acme := tenant(t, pool, "acme")
		s, err := vendoraccount.New(pool, nil)
		require.NoError(t, err)
		require.NoError(t, s.Own(ctx, acme, "stripe", "cli:alice"))
		_, err = pool.Exec(ctx, mark)
		require.NoError(t, err)
		owners, err := s.Owners(ctx, acme)
		require.NoError(t, err)
		require.False(t, owners[0].InForce, mark)
		require.ErrorIs(t, s.Own(ctx, acme, "sendgrid", "cli:alice"), vendoraccount.ErrNotOnlyTenant, mark)
	}
}
