package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/oncebox/oncebox/tenant"
)

// DefaultTenantClaim is Config.TenantClaim's default.
const DefaultTenantClaim = "oncebox_tenant"

// Config configures a Verifier.
type Config struct {
	// Issuer is the authorization server's issuer identifier (its "iss"), whose
	// metadata (RFC 8414 or OpenID discovery) names its keys. Required.
	Issuer string
	// Audience is this resource's identifier: an access token must name it in "aud"
	// (RFC 8707), so a token minted for another service is refused. Required.
	Audience string
	// TenantClaim is the claim naming the oncebox tenant a token acts for. Defaults
	// to DefaultTenantClaim, "oncebox_tenant".
	TenantClaim string
	// ClockSkew is how far the issuer's clock may run ahead or behind ours when "exp",
	// "nbf" and "iat" are checked. Defaults to 30 seconds.
	ClockSkew time.Duration
	// KeyRefreshInterval is how soon after reading the issuer's keys a token signed by
	// a key not among them makes us read them again (a rotation). Defaults to 30
	// seconds.
	KeyRefreshInterval time.Duration
	// KeyMaxAge is how long read keys are used before they are read again, so that a
	// retired key stops working. Defaults to 15 minutes.
	KeyMaxAge time.Duration
	// HTTPClient fetches the metadata and keys. Defaults to a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.TenantClaim == "" {
		out.TenantClaim = DefaultTenantClaim
	}
	if out.ClockSkew == 0 {
		out.ClockSkew = 30 * time.Second
	}
	if out.KeyRefreshInterval == 0 {
		out.KeyRefreshInterval = 30 * time.Second
	}
	if out.KeyMaxAge == 0 {
		out.KeyMaxAge = 15 * time.Minute
	}
	if out.HTTPClient == nil {
		out.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out
}

func (c *Config) validate() error {
	if u, err := url.Parse(c.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("oauth: issuer %q: want the authorization server's issuer URL, e.g. https://auth.example.com", c.Issuer)
	}
	if c.Audience == "" {
		return errors.New("oauth: the audience is required: this server's resource URL (https://oncebox.example.com), which access tokens must name in aud")
	}
	if c.ClockSkew < 0 || c.KeyRefreshInterval < 0 || c.KeyMaxAge < 0 {
		return errors.New("oauth: ClockSkew, KeyRefreshInterval and KeyMaxAge must not be negative; leave them 0 for the defaults")
	}
	return nil
}

// refused returns the *tenant.RefusedError of a token that is not valid here: a
// sentence a client's operator can act on.
func refused(format string, args ...any) error {
	return &tenant.RefusedError{Reason: "the access token is refused: " + fmt.Sprintf(format, args...)}
}

// Claims is what a valid access token says.
type Claims struct {
	// Subject is the token's "sub": the person (or client) it was issued to.
	Subject string
	// Tenant is the value of the tenant claim.
	Tenant string
	// Scopes are the token's scopes ("scope", space separated, or "scp").
	Scopes []string
	// Expiry is the token's "exp".
	Expiry time.Time
}

// Verifier checks access tokens of one authorization server. It is safe for
// concurrent use.
type Verifier struct {
	cfg Config

	mu      sync.Mutex
	jwksURI string
	keys    *jose.JSONWebKeySet
	readAt  time.Time
}

// New returns a Verifier for cfg. It reads nothing yet: the issuer's metadata and keys
// are read at the first token, so that an authorization server that is down does not
// stop oncebox from starting.
func New(cfg Config) (*Verifier, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Verifier{cfg: c}, nil
}

// Issuer returns the issuer the Verifier trusts.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// Audience returns the resource identifier tokens must name.
func (v *Verifier) Audience() string { return v.cfg.Audience }

// algorithms are the signature algorithms accepted: asymmetric only (a shared secret
// would let the resource server mint tokens).
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// LooksLikeAccessToken reports whether token has the shape of a signed JWT (three
// dot-separated parts), so that oncebox's own tokens are told from it unverified.
func (v *Verifier) LooksLikeAccessToken(token string) bool {
	return strings.Count(token, ".") == 2 && len(token) < 16<<10
}

// VerifyAccessToken checks raw and returns what tenant.Store needs of it
// (tenant.AccessTokenVerifier).
func (v *Verifier) VerifyAccessToken(ctx context.Context, raw string) (*tenant.AccessToken, error) {
	c, err := v.Verify(ctx, raw)
	if err != nil {
		return nil, err
	}
	return &tenant.AccessToken{Subject: c.Subject, Tenant: c.Tenant, Scopes: c.Scopes}, nil
}

// Verify checks raw and returns its claims, or a *tenant.RefusedError saying why the
// token is not valid here (its keys unreadable included).
func (v *Verifier) Verify(ctx context.Context, raw string) (*Claims, error) {
	tok, err := jwt.ParseSigned(raw, algorithms)
	if err != nil {
		return nil, refused("it is not a JWT signed with an asymmetric algorithm (%v)", err)
	}
	kid := tok.Headers[0].KeyID
	key, err := v.key(ctx, kid)
	if err != nil {
		return nil, err
	}
	var std jwt.Claims
	var extra map[string]any
	if err := tok.Claims(key, &std, &extra); err != nil {
		return nil, refused("its signature does not match the issuer's key %q", kid)
	}
	if err := v.checkStandard(&std); err != nil {
		return nil, err
	}
	return v.claims(&std, extra)
}

// checkStandard checks iss, aud, exp, nbf and iat.
func (v *Verifier) checkStandard(std *jwt.Claims) error {
	if std.Expiry == nil {
		return refused("it has no expiry (exp)")
	}
	now := v.cfg.Now()
	err := std.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: jwt.Audience{v.cfg.Audience}, Time: now}, v.cfg.ClockSkew)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return refused("it was issued by %q, not by the trusted issuer %q", std.Issuer, v.cfg.Issuer)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return refused("it is for the audience %q, not for this resource %q (ask the authorization server for a token with resource=%s)",
			[]string(std.Audience), v.cfg.Audience, v.cfg.Audience)
	case errors.Is(err, jwt.ErrExpired):
		return refused("it expired at %s", std.Expiry.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return refused("it is not valid yet (nbf or iat is in the future, beyond a clock skew of %s)", v.cfg.ClockSkew)
	default:
		return refused("%v", err)
	}
}

// claims reads the subject, the tenant claim and the scopes.
func (v *Verifier) claims(std *jwt.Claims, extra map[string]any) (*Claims, error) {
	if std.Subject == "" {
		return nil, refused("it names no subject (sub)")
	}
	t, ok := extra[v.cfg.TenantClaim].(string)
	if !ok || t == "" {
		return nil, refused("it has no %q claim naming its oncebox tenant (configure the authorization server to add it)", v.cfg.TenantClaim)
	}
	c := &Claims{Subject: std.Subject, Tenant: t, Expiry: std.Expiry.Time()}
	switch s := extra["scope"].(type) {
	case string:
		c.Scopes = strings.Fields(s)
	}
	if scp, ok := extra["scp"].([]any); ok {
		for _, s := range scp {
			if str, ok := s.(string); ok {
				c.Scopes = append(c.Scopes, str)
			}
		}
	}
	return c, nil
}
