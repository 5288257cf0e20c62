package oauth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/oauth"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/oauthas"
)

const resource = "https://oncebox.example.com"

// TestVerifierChecksTokensOfARealAuthorizationServer (issue 45, item 1): tokens that a
// running authorization server issues for this resource are accepted; one for another
// audience, an expired one, one of another issuer, one with no tenant claim, one signed
// by a key the server rotated out and a non-JWT are refused, each with its reason. A
// key the server rotated in is fetched when its first token arrives; the clock skew is
// honoured.
func TestVerifierChecksTokensOfARealAuthorizationServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	as := oauthas.Start()
	t.Cleanup(as.Close)
	as.AddClient("agent", oauthas.Client{Secret: "s1", Subject: "agent-7", Tenant: "acme"})
	v, err := oauth.New(oauth.Config{Issuer: as.Issuer(), Audience: resource, KeyRefreshInterval: time.Nanosecond})
	require.NoError(t, err)

	good, err := as.Token("agent", resource, "oncebox:agent")
	require.NoError(t, err)
	c, err := v.Verify(ctx, good)
	require.NoError(t, err)
	require.Equal(t, "agent-7", c.Subject)
	require.Equal(t, "acme", c.Tenant)
	require.Equal(t, []string{"oncebox:agent"}, c.Scopes)

	refusedFor := func(token, reason string) {
		t.Helper()
		_, err := v.Verify(ctx, token)
		require.ErrorIs(t, err, tenant.ErrUnauthorized)
		var r *tenant.RefusedError
		require.True(t, errors.As(err, &r))
		require.Contains(t, r.Reason, reason)
	}
	other, err := as.Token("agent", "https://other.example.com", "oncebox:agent")
	require.NoError(t, err)
	refusedFor(other, `not for this resource "https://oncebox.example.com"`)
	base := map[string]any{"sub": "agent-7", "aud": resource, "scope": "oncebox:agent", "oncebox_tenant": "acme"}
	with := func(k string, val any) map[string]any {
		m := map[string]any{}
		for kk, vv := range base {
			m[kk] = vv
		}
		m[k] = val
		return m
	}
	refusedFor(as.Mint(with("exp", time.Now().Add(-2*time.Minute).Unix()), 0), "expired at")
	_, err = v.Verify(ctx, as.Mint(with("exp", time.Now().Add(-10*time.Second).Unix()), 0))
	require.NoError(t, err, "10 s past exp is within the 30 s clock skew")
	refusedFor(as.Mint(with("oncebox_tenant", ""), time.Hour), `no "oncebox_tenant" claim`)
	refusedFor(as.Mint(with("iss", "https://evil.example.com"), time.Hour), `issued by "https://evil.example.com"`)
	refusedFor("obx_not-a-jwt.x.y", "not a JWT")

	stranger := oauthas.Start()
	t.Cleanup(stranger.Close)
	refusedFor(stranger.Mint(with("iss", as.Issuer()), time.Hour), "signature does not match")

	as.Rotate()
	rotated, err := as.Token("agent", resource, "oncebox:agent")
	require.NoError(t, err)
	_, err = v.Verify(ctx, rotated)
	require.NoError(t, err, "a new key is fetched when its first token arrives")
	refusedFor(good, "a key (kid \"key-1\") that the issuer does not publish")
}

// TestVerifierSaysWhenTheIssuerCannotBeRead: an issuer that does not answer refuses
// tokens with a reason, not a server error.
func TestVerifierSaysWhenTheIssuerCannotBeRead(t *testing.T) {
	t.Parallel()
	as := oauthas.Start()
	token := as.Mint(map[string]any{"sub": "x", "aud": resource, "oncebox_tenant": "acme"}, time.Hour)
	as.Close()
	v, err := oauth.New(oauth.Config{Issuer: as.Issuer(), Audience: resource})
	require.NoError(t, err)
	_, err = v.Verify(context.Background(), token)
	require.ErrorIs(t, err, tenant.ErrUnauthorized)
	require.ErrorContains(t, err, "keys could not be read")

	_, err = oauth.New(oauth.Config{Issuer: "auth.example.com", Audience: resource})
	require.ErrorContains(t, err, "want the authorization server's issuer URL")
	_, err = oauth.New(oauth.Config{Issuer: "https://auth.example.com"})
	require.ErrorContains(t, err, "audience is required")
}
