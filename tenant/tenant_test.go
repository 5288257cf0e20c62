package tenant_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/pglisten"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestTokensAreHashedAndRevocable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	s := tenant.NewStore(pool)

	tn, token, err := s.Create(ctx, "acme")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(token, tenant.TokenPrefix))

	var stored int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_api_token WHERE position($1::bytea in token_hash) > 0 OR prefix = $2",
		[]byte(token), token).Scan(&stored))
	require.Zero(t, stored, "the token itself is never stored")

	got, err := s.Authenticate(ctx, token)
	require.NoError(t, err)
	require.Equal(t, tn.ID, got.ID)

	_, err = s.Authenticate(ctx, token+"x")
	require.ErrorIs(t, err, tenant.ErrUnauthorized)
	_, err = s.Authenticate(ctx, "garbage")
	require.ErrorIs(t, err, tenant.ErrUnauthorized)

	_, _, err = s.Create(ctx, "acme")
	require.ErrorIs(t, err, tenant.ErrExists)

	second, err := s.NewToken(ctx, "acme")
	require.NoError(t, err)
	require.NoError(t, s.RevokeToken(ctx, token))
	_, err = s.Authenticate(ctx, token)
	require.ErrorIs(t, err, tenant.ErrUnauthorized)
	_, err = s.Authenticate(ctx, second)
	require.NoError(t, err, "revoking one token leaves the others")

	toks, err := s.Tokens(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, toks, 2)
	require.NoError(t, s.RevokeToken(ctx, toks[1].Prefix))
	_, err = s.Authenticate(ctx, second)
	require.ErrorIs(t, err, tenant.ErrUnauthorized)
}

// watchedStore returns a caching Store over pool that a listener gives AuthChannel's
// notifications, as serve does, until the test ends.
func watchedStore(t *testing.T, pool *pgxpool.Pool) *tenant.Store {
	t.Helper()
	s := tenant.NewCachingStore(pool, time.Hour)
	l := pglisten.New(pool.Config().ConnConfig.Copy(), nil)
	l.Handle(tenant.AuthChannel, s, "token checks ask Postgres")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, s.ListeningForTest, 10*time.Second, 10*time.Millisecond)
	return s
}

// TestCachingStoreRevocation: a token remembered by a caching store (an hour) stops
// working there when another process revokes it, as soon as Postgres's notification
// arrives; without a listener, the store remembers nothing and the revocation takes
// effect at once. A revocation through the store itself takes effect at once either way.
func TestCachingStoreRevocation(t *testing.T) {
	t.Parallel()
	for _, watched := range []bool{true, false} {
		t.Run(fmt.Sprintf("watched=%t", watched), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := dbtest.Schema(t)
			cached := tenant.NewCachingStore(pool, time.Hour)
			if watched {
				cached = watchedStore(t, pool)
			}
			other := tenant.NewStore(pool)

			_, token, err := cached.Create(ctx, "acme")
			require.NoError(t, err)
			_, err = cached.Authenticate(ctx, token)
			require.NoError(t, err)
			require.NoError(t, other.RevokeToken(ctx, token))
			if watched {
				require.Eventually(t, func() bool {
					_, err := cached.Authenticate(ctx, token)
					return errors.Is(err, tenant.ErrUnauthorized)
				}, 5*time.Second, 10*time.Millisecond, "a token revoked elsewhere still works in the caching store")
			} else {
				_, err = cached.Authenticate(ctx, token)
				require.ErrorIs(t, err, tenant.ErrUnauthorized)
			}

			second, err := cached.NewToken(ctx, "acme")
			require.NoError(t, err)
			_, err = cached.Authenticate(ctx, second)
			require.NoError(t, err)
			require.NoError(t, cached.RevokeToken(ctx, second))
			_, err = cached.Authenticate(ctx, second)
			require.ErrorIs(t, err, tenant.ErrUnauthorized)
		})
	}
}

// TestCachingStoreForgetsACheckReadBeforeARevocation: a check that read the token as
// live, then saw the cache emptied by a revocation before it could remember its answer,
// does not remember it: the next check asks Postgres.
func TestCachingStoreForgetsACheckReadBeforeARevocation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	cached := watchedStore(t, pool)
	other := tenant.NewStore(pool)
	_, token, err := cached.Create(ctx, "acme")
	require.NoError(t, err)

	once := true
	cached.BeforeRememberForTest(func() {
		if !once {
			return
		}
		once = false
		before := cached.ForgetsForTest()
		require.NoError(t, other.RevokeToken(ctx, token))
		require.Eventually(t, func() bool { return cached.ForgetsForTest() > before }, 5*time.Second, time.Millisecond)
	})
	_, err = cached.Authenticate(ctx, token)
	require.NoError(t, err, "the check read the token before its revocation")
	_, err = cached.Authenticate(ctx, token)
	require.ErrorIs(t, err, tenant.ErrUnauthorized)
}

func TestTokenRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	s := tenant.NewStore(pool)

	tn, agent, err := s.Create(ctx, "acme")
	require.NoError(t, err)
	p, err := s.Authenticate(ctx, agent)
	require.NoError(t, err)
	require.Equal(t, tenant.RoleAgent, p.Role, "tenant create makes an agent token")
	require.Equal(t, tn.ID, p.ID)

	approver, err := s.NewTokenWithRole(ctx, "acme", tenant.RoleApprover)
	require.NoError(t, err)
	admin, err := s.NewTokenWithRole(ctx, "acme", tenant.RoleAdmin)
	require.NoError(t, err)
	_, err = s.NewTokenWithRole(ctx, "acme", tenant.Role("root"))
	require.ErrorContains(t, err, "unknown role")

	pa, err := s.Authenticate(ctx, approver)
	require.NoError(t, err)
	require.Equal(t, tenant.RoleApprover, pa.Role)
	require.True(t, pa.Role.CanDecide())
	require.False(t, pa.Role.CanEnqueue())
	pd, err := s.Authenticate(ctx, admin)
	require.NoError(t, err)
	require.Equal(t, tenant.RoleAdmin, pd.Role)
	require.NotEqual(t, pa.TokenID, pd.TokenID)
	require.Contains(t, pa.Actor(), "approver")
	require.False(t, p.Role.CanDecide())
	require.True(t, p.Role.CanEnqueue())

	toks, err := s.Tokens(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, toks, 3)
	require.Equal(t, []tenant.Role{tenant.RoleAgent, tenant.RoleApprover, tenant.RoleAdmin},
		[]tenant.Role{toks[0].Role, toks[1].Role, toks[2].Role})
	require.Equal(t, pa.TokenID, toks[1].ID)

	for _, name := range []string{"agent", "auditor", "approver", "admin", "operator"} {
		r, err := tenant.ParseRole(name)
		require.NoError(t, err)
		require.Equal(t, name, string(r))
	}
	_, err = tenant.ParseRole("Admin")
	require.Error(t, err)
}

// TestRevokeMintedLeavesOtherTokens: revoking a minter's tokens (what `oncebox dev`
// does at start) leaves every token made otherwise live, and another tenant's too.
func TestRevokeMintedLeavesOtherTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := tenant.NewStore(dbtest.Schema(t))
	_, first, err := s.Create(ctx, "demo")
	require.NoError(t, err)
	operator, err := s.NewTokenWithRole(ctx, "demo", tenant.RoleAdmin)
	require.NoError(t, err)
	dev, err := s.NewMintedToken(ctx, "demo", tenant.RoleAgent, tenant.MinterDev)
	require.NoError(t, err)
	devApprover, err := s.NewMintedToken(ctx, "demo", tenant.RoleApprover, tenant.MinterDev)
	require.NoError(t, err)
	_, _, err = s.Create(ctx, "other")
	require.NoError(t, err)
	otherDev, err := s.NewMintedToken(ctx, "other", tenant.RoleAgent, tenant.MinterDev)
	require.NoError(t, err)

	require.True(t, strings.HasPrefix(dev, "obx_dev."), dev)
	toks, err := s.Tokens(ctx, "demo")
	require.NoError(t, err)
	require.Equal(t, "obx_dev.", toks[2].Prefix[:8], "the mark is in the listed prefix")
	n, err := s.RevokeMinted(ctx, "demo", tenant.MinterDev)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	for _, tok := range []string{dev, devApprover} {
		_, err = s.Authenticate(ctx, tok)
		require.ErrorIs(t, err, tenant.ErrUnauthorized, "a token dev minted is revoked")
	}
	for _, tok := range []string{first, operator, otherDev} {
		_, err = s.Authenticate(ctx, tok)
		require.NoError(t, err, "a token made otherwise, or another tenant's, stays live")
	}
	_, err = s.RevokeMinted(ctx, "demo", "")
	require.Error(t, err)
	_, err = s.NewMintedToken(ctx, "demo", tenant.RoleAgent, "")
	require.Error(t, err)
}
