package oauth

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// MetadataPathPrefix is where protected resource metadata lives (RFC 9728 §3).
const MetadataPathPrefix = "/.well-known/oauth-protected-resource"

// ScopePrefix starts every oncebox scope: "oncebox:" + a role (oncebox:agent,
// oncebox:auditor, oncebox:approver, oncebox:admin).
const ScopePrefix = "oncebox:"

// Scopes are the scopes oncebox understands, one per role a token may carry.
var Scopes = []string{ScopePrefix + "agent", ScopePrefix + "auditor", ScopePrefix + "approver", ScopePrefix + "admin"}

// MetadataPaths returns the paths the metadata is served at: RFC 9728's, derived from
// the audience by inserting the well-known segment before its path, and the bare
// prefix (clients that look at the server's root).
func (v *Verifier) MetadataPaths() []string {
	paths := []string{MetadataPathPrefix}
	if p := audiencePath(v.cfg.Audience); p != "" {
		paths = append(paths, MetadataPathPrefix+p)
	}
	return paths
}

// MetadataURL returns the absolute URL of the metadata, for WWW-Authenticate's
// resource_metadata.
func (v *Verifier) MetadataURL() string {
	u, err := url.Parse(v.cfg.Audience)
	if err != nil || u.Host == "" {
		return MetadataPathPrefix
	}
	u.Path, u.RawQuery, u.Fragment = MetadataPathPrefix+audiencePath(v.cfg.Audience), "", ""
	return u.String()
}

func audiencePath(audience string) string {
	u, err := url.Parse(audience)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.Path, "/")
}

// MetadataHandler serves the protected resource metadata: this resource, the
// authorization server to get tokens from, the scopes, and tokens in the header only.
func (v *Verifier) MetadataHandler() http.Handler {
	return auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               v.cfg.Audience,
		AuthorizationServers:   []string{v.cfg.Issuer},
		ScopesSupported:        Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "oncebox",
	})
}
