// Package oauth makes oncebox an OAuth 2.1 resource server: it checks access tokens
// (JWTs) issued by an external authorization server against the keys that server
// publishes (discovery, JWKS, rotation), the issuer, the audience (this resource, RFC
// 8707), the expiry with a clock skew, and reads the subject, the tenant claim and the
// scopes; and it serves the protected resource metadata (RFC 9728) that tells MCP
// clients where to sign in. tenant.Store turns a checked token into a Principal.
package oauth
