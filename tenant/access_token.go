package tenant

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// RefusedError is an ErrUnauthorized that says why a token was refused.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// Unwrap makes errors.Is(err, ErrUnauthorized) true.
func (e *RefusedError) Unwrap() error { return ErrUnauthorized }

// RefusalReason returns why err (an ErrUnauthorized from Authenticate) refused a token,
// as a sentence without a final period.
func RefusalReason(err error) string {
	var r *RefusedError
	if errors.As(err, &r) {
		return r.Reason
	}
	return "the API token is unknown or revoked"
}

// AccessToken is what an access token issued by an external authorization server
// says, once checked.
type AccessToken struct {
	// Subject is the token's "sub": the person (or client) it was issued to.
	Subject string
	// Tenant is the name of the oncebox tenant the token acts for (the tenant claim).
	Tenant string
	// Scopes are the token's scopes.
	Scopes []string
}

// AccessTokenVerifier checks access tokens of an external authorization server
// (doors/oauth's Verifier). VerifyAccessToken returns a *RefusedError for a token
// that is not valid.
type AccessTokenVerifier interface {
	VerifyAccessToken(ctx context.Context, token string) (*AccessToken, error)
	// LooksLikeAccessToken reports whether token is shaped like the verifier's tokens.
	LooksLikeAccessToken(token string) bool
}

// AcceptAccessTokens makes Authenticate accept the access tokens v checks besides
// oncebox's own tokens: each maps to the tenant its tenant claim names and to the role
// its one oncebox scope names ("oncebox:agent", "oncebox:auditor", "oncebox:approver", "oncebox:admin");
// its subject is the Principal's Person, so that two tokens of one subject are one
// voter. Call it before serving.
func (s *Store) AcceptAccessTokens(v AccessTokenVerifier) { s.access = v }

// ScopeOf returns the OAuth scope that grants role: "oncebox:" + role.
func ScopeOf(role Role) string { return "oncebox:" + string(role) }

// authenticateAccessToken checks an external access token and maps it to a Principal.
func (s *Store) authenticateAccessToken(ctx context.Context, token string) (*Principal, error) {
	at, err := s.access.VerifyAccessToken(ctx, token)
	if err != nil {
		return nil, err
	}
	role, err := roleOfScopes(at.Scopes)
	if err != nil {
		return nil, err
	}
	person, err := NormalizePerson(at.Subject)
	if err != nil {
		return nil, &RefusedError{Reason: "the access token's subject is not usable as a person (1 to 200 characters)"}
	}
	t, err := s.ByName(ctx, at.Tenant)
	if errors.Is(err, ErrNotFound) {
		return nil, &RefusedError{Reason: fmt.Sprintf("the access token's tenant claim names %q, which is no tenant of this oncebox", at.Tenant)}
	}
	if err != nil {
		return nil, err
	}
	return &Principal{Tenant: *t, Role: role, Person: person, Subject: at.Subject}, nil
}

// roleOfScopes returns the one role the scopes grant.
func roleOfScopes(scopes []string) (Role, error) {
	var roles []Role
	for _, r := range []Role{RoleAgent, RoleAuditor, RoleApprover, RoleAdmin} {
		for _, sc := range scopes {
			if sc == ScopeOf(r) {
				roles = append(roles, r)
				break
			}
		}
	}
	switch len(roles) {
	case 1:
		return roles[0], nil
	case 0:
		return "", &RefusedError{Reason: "the access token grants no oncebox scope: ask for oncebox:agent (an agent), or oncebox:auditor, oncebox:approver or oncebox:admin (a person)"}
	default:
		names := make([]string, len(roles))
		for i, r := range roles {
			names[i] = ScopeOf(r)
		}
		return "", &RefusedError{Reason: fmt.Sprintf("the access token grants several oncebox roles (%s); ask for one: an agent's token never approves",
			strings.Join(names, " "))}
	}
}
