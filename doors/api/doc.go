// Package api is oncebox's agent-facing HTTP API.
//
// An agent (or the gateway in front of it) records a side effect with
//
//	POST /v1/ops
//	Authorization: Bearer obx_...
//	Idempotency-Key: order-1234-refund
//	Content-Type: application/json
//
//	{"tool": "stripe.refund", "args": {"payment_intent": "pi_123", "amount": 500}}
//
// and gets 202 Accepted with the op and a Location header. Sending the same key with
// the same payload again is a replay: 200 OK, the same op, Idempotent-Replayed: true,
// and once the op is settled its stored result byte for byte. The same key with another
// payload is refused with 422. Status codes follow the IETF Idempotency-Key header
// draft; every error is an RFC 9457 problem document (application/problem+json) whose
// type is a stable URL under https://oncebox.dev/problems/. That includes a request no
// route serves: 404 (type no-route), or 405 (type method-not-allowed, with an Allow
// header) when the path exists for other methods.
//
// GET /v1/ops/{key} looks an op up (support, or polling with ?wait=30s), and
// POST /v1/ops/{key}/approve and /reject decide ops that await a person's approval.
// With ?history=true an op carries a "history" member holding its dispatch attempts,
// recorded decisions and the MCP calls matched to it by identity (it is nested because
// "attempts" already counts them). An op
// never shows its args: they may be redacted or personal. Every op route is scoped by the tenant of the bearer token: another tenant's key is
// not found, exactly as a key that does not exist.
//
// GET /v1/audit streams the token's tenant's audit log (package audit) as JSON lines or
// CSV, to auditor and admin tokens only: an agent token is refused before anything is
// read. An export that fails after its first byte is cut, not ended, so that a
// truncated export never looks whole.
//
// The routes are described by an OpenAPI 3.1 document, served at /openapi.json and
// returned by OpenAPI; the package's tests drive the handlers into every status code
// that document lists.
package api
