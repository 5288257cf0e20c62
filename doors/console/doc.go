// Package console is the web console for people at /console/: the approver of a large
// refund, support asked "was I charged twice?", whoever resolves a needs_review op, and
// finance closing the month, the auditor asking months later who approved a refund. Pages
// are rendered on the server from templates embedded in the binary, with plain CSS and no
// script: they work without JavaScript and without internet access.
//
// A person signs in with an approver, auditor or admin API token; the token is exchanged for a
// session cookie (HttpOnly, SameSite=Strict, expiring; Secure over HTTPS: TLS,
// Config.SecureCookies or a trusted X-Forwarded-Proto) whose random secret the database stores only as a SHA-256 hash, so a session acts as its token and
// ends when the token is revoked. Every form carries a CSRF token derived from the
// session's secret, and cross-origin posts are refused. Decisions go through the same
// outbox and reconcile calls as the HTTP API, with the same role rule
// (tenant.Role.CanDecide). Each route states the role it needs (signedIn with a need):
// the approvers' pages need CanDecide; an admin token also gets the Budgets page and the
// Vendors page (the tenant's vendor settings, an own key shown only by its fingerprint and
// last 4 characters); the Audit page (audit.go) needs tenant.Role.CanAudit (an auditor or
// an admin) and reads the tenant's audit log with audit.Export, read-only, with filters
// and CSV and JSONL downloads. A role refused a page gets 403 and no link to it; an
// auditor lands on the Audit page and never gets a form that decides.
package console
