// Package tenant manages oncebox's tenants and their API tokens.
//
// A token is shown once, when it is created; only its SHA-256 hash is stored, with a short
// prefix so an operator can tell tokens apart when revoking one. Authenticate maps a
// presented token to its tenant in constant time with respect to the stored hashes (the
// lookup is by hash, never by comparing secrets).
package tenant
