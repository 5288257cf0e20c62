// Package console is the web console for people at /console/: the approver of a large
// refund, support asked "was I charged twice?", whoever resolves a needs_review op, and
// finance closing the month. Pages are rendered on the server from templates embedded in
// the binary, with plain CSS and no script: they work without JavaScript and without
// internet access.
//
// A person signs in with an approver or admin API token; the token is exchanged for a
// session cookie (HttpOnly, SameSite=Strict, expiring; Secure over HTTPS: TLS,
// Config.SecureCookies or a trusted X-Forwarded-Proto) whose random secret the database stores only as a SHA-256 hash, so a session acts as its token and
// ends when the token is revoked. Every form carries a CSRF token derived from the
// session's secret, and cross-origin posts are refused. Decisions go through the same
// outbox and reconcile calls as the HTTP API, with the same role rule
// (tenant.Role.CanDecide). An admin token also gets the Budgets page and the Vendors
// page (the tenant's vendor settings, an own key shown only by its fingerprint and last 4
// characters).
package console
