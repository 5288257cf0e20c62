// Package oauthas is an OAuth 2.1 authorization server for tests: RFC 8414 metadata,
// a JWKS endpoint, and a token endpoint that issues JWT access tokens (RFC 9068) to
// registered clients for the client_credentials grant, with the audience taken from
// the resource parameter (RFC 8707). Its keys rotate on demand. Tokens are signed with
// a real JOSE library, so a resource server's checks are tested for real.
package oauthas

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Client is a registered client: its secret, and the subject and tenant of the tokens
// it gets.
type Client struct {
	Secret  string
	Subject string
	Tenant  string
}

// Server is a running authorization server.
type Server struct {
	srv *httptest.Server
	// TenantClaim names the claim carrying Client.Tenant. Defaults to "oncebox_tenant".
	TenantClaim string

	mu      sync.Mutex
	key     *ecdsa.PrivateKey
	kid     string
	serial  int
	clients map[string]Client
}

// Start starts a server; Close stops it.
func Start() *Server {
	s := &Server{TenantClaim: "oncebox_tenant", clients: map[string]Client{}}
	s.Rotate()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.metadata)
	mux.HandleFunc("GET /jwks", s.jwks)
	mux.HandleFunc("POST /token", s.token)
	s.srv = httptest.NewServer(mux)
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Issuer returns the issuer identifier (the server's URL).
func (s *Server) Issuer() string { return s.srv.URL }

// TokenURL returns the token endpoint.
func (s *Server) TokenURL() string { return s.srv.URL + "/token" }

// AddClient registers a client.
func (s *Server) AddClient(id string, c Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[id] = c
}

// Rotate replaces the signing key with a new one; only the new one is published from
// then on.
func (s *Server) Rotate() {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serial++
	s.key, s.kid = key, fmt.Sprintf("key-%d", s.serial)
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer": s.Issuer(), "jwks_uri": s.srv.URL + "/jwks", "token_endpoint": s.TokenURL(),
		"authorization_endpoint":                s.srv.URL + "/authorize",
		"grant_types_supported":                 []string{"client_credentials"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"code_challenge_methods_supported":      []string{"S256"},
		"response_types_supported":              []string{"code"},
	})
}

func (s *Server) jwks(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	k := jose.JSONWebKey{Key: s.key.Public(), KeyID: s.kid, Algorithm: string(jose.ES256), Use: "sig"}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k}})
}

// token issues an access token for the client_credentials grant.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
	}
	s.mu.Lock()
	c, known := s.clients[id]
	s.mu.Unlock()
	if !known || c.Secret != secret {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	if r.PostFormValue("grant_type") != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	resource := r.PostFormValue("resource")
	if resource == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_target", "error_description": "name the resource (RFC 8707)"})
		return
	}
	scope := r.PostFormValue("scope")
	tok := s.Mint(map[string]any{"sub": c.Subject, "aud": resource, "scope": scope, s.TenantClaim: c.Tenant}, time.Hour)
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600, "scope": scope})
}

// Mint signs claims with the current key, adding iss, iat, jti and, unless claims
// has one, an exp ttl from now. Tests use it for tokens the token endpoint would not
// issue (expired ones, say).
func (s *Server) Mint(claims map[string]any, ttl time.Duration) string {
	s.mu.Lock()
	key, kid := s.key, s.kid
	s.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", kid))
	if err != nil {
		panic(err)
	}
	now := time.Now()
	all := map[string]any{"iss": s.Issuer(), "iat": now.Unix(), "exp": now.Add(ttl).Unix(), "jti": rand.Text(), "client_id": "test"}
	for k, v := range claims {
		all[k] = v
	}
	tok, err := jwt.Signed(signer).Claims(all).Serialize()
	if err != nil {
		panic(err)
	}
	return tok
}

// Token asks the token endpoint for a token over HTTP, as a client does.
func (s *Server) Token(clientID, resource, scope string) (string, error) {
	s.mu.Lock()
	c := s.clients[clientID]
	s.mu.Unlock()
	form := "grant_type=client_credentials&resource=" + url.QueryEscape(resource) + "&scope=" + url.QueryEscape(scope)
	req, err := http.NewRequest(http.MethodPost, s.TokenURL(), strings.NewReader(form))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(clientID, c.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	if out.AccessToken == "" {
		return "", fmt.Errorf("token endpoint: %s: %s", resp.Status, out.Error)
	}
	return out.AccessToken, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
