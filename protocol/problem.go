package protocol

import "strings"

// ProblemBase is the prefix of every problem type.
const ProblemBase = "https://oncebox.dev/problems/"

// The problem types of the HTTP API: the "type" member of every
// application/problem+json refusal (Problem). They are stable; a client tells refusals
// apart by them (and by the status code), never by the title or the detail.
const (
	// ProblemMissingKey: a route that records an op got no Idempotency-Key header
	// (400).
	ProblemMissingKey = ProblemBase + "missing-idempotency-key"
	// ProblemInvalidKey: the idempotency key breaks one of NormalizeKey's rules,
	// named by the member rule (400).
	ProblemInvalidKey = ProblemBase + "invalid-idempotency-key"
	// ProblemUnauthorized: the bearer token is missing, unknown or revoked (401).
	ProblemUnauthorized = ProblemBase + "unauthorized"
	// ProblemInvalidJSON: the request body is not one JSON object of the route's
	// shape (400).
	ProblemInvalidJSON = ProblemBase + "invalid-json"
	// ProblemUnsupportedMediaType: the request body is not declared as
	// application/json (415).
	ProblemUnsupportedMediaType = ProblemBase + "unsupported-media-type"
	// ProblemPayloadTooLarge: the request body exceeds the server's limit (413).
	ProblemPayloadTooLarge = ProblemBase + "payload-too-large"
	// ProblemUnknownTool: the server has no tool of that name; the member
	// known_tools lists those it has (400).
	ProblemUnknownTool = ProblemBase + "unknown-tool"
	// ProblemInvalidArgs: the tool's arguments are invalid; the member field names
	// the offending one, such as "args.amount" (400).
	ProblemInvalidArgs = ProblemBase + "invalid-args"
	// ProblemKeyConflict: the idempotency key was already used with another payload;
	// the members stored_fingerprint and given_fingerprint say which (422).
	ProblemKeyConflict = ProblemBase + "key-conflict"
	// ProblemInvalidRequest: a request member is missing or invalid; the member
	// field names it (400).
	ProblemInvalidRequest = ProblemBase + "invalid-request"
	// ProblemForbidden: the token's role does not allow the action (403).
	ProblemForbidden = ProblemBase + "forbidden"
	// ProblemNotFound: no op under this key for the caller's tenant, or an object a
	// new call names (such as the payment_intent of a refund) is not one of the tenant's,
	// the member field naming the argument; nothing was recorded or sent (404).
	ProblemNotFound = ProblemBase + "not-found"
	// ProblemWrongState: the op is not in the state the action needs; the member
	// op_status says where it stands (409).
	ProblemWrongState = ProblemBase + "wrong-state"
	// ProblemInvalidWait: the wait query parameter is not a duration the server
	// accepts (400).
	ProblemInvalidWait = ProblemBase + "invalid-wait"
	// ProblemNoRoute: the API serves nothing at this path (404).
	ProblemNoRoute = ProblemBase + "no-route"
	// ProblemMethodNotAllowed: the path does not allow this method; the Allow header
	// lists those it does (405).
	ProblemMethodNotAllowed = ProblemBase + "method-not-allowed"
	// ProblemTooManyWaits: the tenant already holds as many open waits as the
	// server allows; nothing was recorded (429).
	ProblemTooManyWaits = ProblemBase + "too-many-waits"
	// ProblemTooManyExports: the process already streams as many audit exports as it
	// allows, each on a database connection of the API's (429).
	ProblemTooManyExports = ProblemBase + "too-many-exports"
	// ProblemStoreUnavailable: the database cannot be reached; retry with the same
	// key after Retry-After (503).
	ProblemStoreUnavailable = ProblemBase + "store-unavailable"
	// ProblemTenantMoving: the tenant is being moved to another cell
	// (docs/scaling.md); nothing was recorded; retry after Retry-After (503).
	ProblemTenantMoving = ProblemBase + "tenant-moving"
	// ProblemCellUnavailable: the cell that holds the tenant cannot be reached;
	// nothing was recorded; retry after Retry-After (503).
	ProblemCellUnavailable = ProblemBase + "cell-unavailable"
	// ProblemPolicyChanged: the op's approval policy changed since it started
	// waiting, so an approval is refused; the op keeps waiting (409).
	ProblemPolicyChanged = ProblemBase + "policy-changed"
	// ProblemVendorUnavailable: the vendor had to be asked whose an object the call
	// names is, and could not be; nothing was recorded or sent: retry with the same key
	// after Retry-After (503).
	ProblemVendorUnavailable = ProblemBase + "vendor-unavailable"
	// ProblemBudgetExceeded: the op would exceed a budget, named by the member
	// budget; nothing was recorded (429).
	ProblemBudgetExceeded = ProblemBase + "budget-exceeded"
	// ProblemFingerprintMismatch: the fingerprint a decision names is not the stored
	// op's (409).
	ProblemFingerprintMismatch = ProblemBase + "fingerprint-mismatch"
	// ProblemReadFailed: a read tool of the tool catalog got no answer from its target
	// (502); nothing was recorded or changed.
	ProblemReadFailed = ProblemBase + "read-failed"
	// ProblemInternal: the server failed; the cause is logged, not answered (500).
	ProblemInternal = ProblemBase + "internal"

	// The refusals of the vendor event endpoints (POST /v1/vendor-events/…).

	// ProblemInvalidSignature: the signature headers are missing, do not verify or
	// are too old (400).
	ProblemInvalidSignature = ProblemBase + "invalid-signature"
	// ProblemInvalidEvent: the body verified but cannot be read as the vendor's
	// events (400).
	ProblemInvalidEvent = ProblemBase + "invalid-event"
	// ProblemVendorEventsNotConfigured: the server has no signing secret or key for
	// the vendor (404).
	ProblemVendorEventsNotConfigured = ProblemBase + "vendor-events-not-configured"

	// The refusals only the console's pages answer, as the data-reason of their
	// error (the slug, ProblemSlug); the console also answers some of the types
	// above, such as ProblemWrongState and ProblemForbidden.

	// ProblemNoPage: the console has no page at this path (404).
	ProblemNoPage = ProblemBase + "no-page"
	// ProblemSignedOut: the console session ended or was never opened (401).
	ProblemSignedOut = ProblemBase + "signed-out"
	// ProblemCSRF: a console form's security token is missing or stale (403).
	ProblemCSRF = ProblemBase + "csrf"
	// ProblemCrossOrigin: a console form was sent from another origin (403).
	ProblemCrossOrigin = ProblemBase + "cross-origin"
	// ProblemLinkUsed: a console sign-in link is unknown, expired or already used
	// (401).
	ProblemLinkUsed = ProblemBase + "link-used"
)

// Problem is an RFC 9457 problem document, the body of every application/problem+json
// refusal, with oncebox's extension members (each sent only with the types that name
// it).
type Problem struct {
	// Type is one of the Problem* constants, such as ProblemKeyConflict.
	Type string `json:"type"`
	// Title is a short human summary of the type (ProblemTitle).
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence and how to fix it.
	Detail string `json:"detail"`

	// Field is the dotted path of the offending request member, such as "args.amount".
	Field string `json:"field,omitempty"`
	// Rule names the broken rule: an idempotency-key rule (KeyError.Rule, with
	// ProblemInvalidKey), or one oncebox sets on a tool's arguments, such as
	// "tag_argument" (ProblemInvalidArgs).
	Rule string `json:"rule,omitempty"`
	// KnownTools lists the tools the server accepts (ProblemUnknownTool).
	KnownTools []string `json:"known_tools,omitempty"`
	// StoredFingerprint is the fingerprint of the payload first sent under the key
	// (ProblemKeyConflict).
	StoredFingerprint string `json:"stored_fingerprint,omitempty"`
	// GivenFingerprint is the fingerprint of this request's payload
	// (ProblemKeyConflict).
	GivenFingerprint string `json:"given_fingerprint,omitempty"`
	// OpStatus is where the op stands (ProblemWrongState).
	OpStatus string `json:"op_status,omitempty"`
	// Budget names the budget the op would exceed (ProblemBudgetExceeded).
	Budget string `json:"budget,omitempty"`
}

// NewProblem returns the problem of a type with its title.
func NewProblem(status int, problemType, detail string) *Problem {
	return &Problem{Type: problemType, Title: ProblemTitle(problemType), Status: status, Detail: detail}
}

// ProblemSlug returns a problem type without ProblemBase, such as "wrong-state".
func ProblemSlug(problemType string) string {
	return strings.TrimPrefix(problemType, ProblemBase)
}

// ProblemTitle returns the title of a problem type, and "Internal server error" for a
// type this package does not define. The titles are a flat list, one per type.
func ProblemTitle(problemType string) string {
	switch problemType {
	case ProblemMissingKey:
		return "Idempotency-Key header is missing"
	case ProblemInvalidKey:
		return "Idempotency-Key is malformed"
	case ProblemUnauthorized:
		return "Missing or invalid API token"
	case ProblemInvalidJSON:
		return "Request body is not valid JSON for this route"
	case ProblemUnsupportedMediaType:
		return "Request body must be application/json"
	case ProblemPayloadTooLarge:
		return "Request body is too large"
	case ProblemUnknownTool:
		return "Unknown tool"
	case ProblemInvalidArgs:
		return "Invalid tool call"
	case ProblemReadFailed:
		return "The read tool's target did not answer"
	case ProblemKeyConflict:
		return "Idempotency key reused with a different payload"
	case ProblemInvalidRequest:
		return "A request member is missing or invalid"
	case ProblemForbidden:
		return "The API token's role does not allow this"
	case ProblemNotFound:
		return "Op or object not found"
	case ProblemWrongState:
		return "Op is not in the state this action needs"
	case ProblemInvalidWait:
		return "Invalid wait parameter"
	case ProblemNoRoute:
		return "No such route"
	case ProblemMethodNotAllowed:
		return "Method not allowed on this route"
	case ProblemTooManyWaits:
		return "Too many open waits for this tenant"
	case ProblemTooManyExports:
		return "Too many audit exports at once"
	case ProblemStoreUnavailable:
		return "The database is unavailable"
	case ProblemTenantMoving:
		return "The tenant is being moved to another cell"
	case ProblemCellUnavailable:
		return "The tenant's cell is unavailable"
	case ProblemVendorUnavailable:
		return "The vendor cannot be asked about an object the call names"
	case ProblemBudgetExceeded:
		return "The op would exceed a budget"
	case ProblemPolicyChanged:
		return "The approval policy changed since the op started waiting"
	case ProblemFingerprintMismatch:
		return "The decision is about another call than the stored one"
	case ProblemInvalidSignature:
		return "Vendor event signature refused"
	case ProblemInvalidEvent:
		return "Vendor event cannot be read"
	case ProblemVendorEventsNotConfigured:
		return "Vendor events are not configured"
	case ProblemNoPage:
		return "No such console page"
	case ProblemSignedOut:
		return "Not signed in to the console"
	case ProblemCSRF:
		return "The form's security token is missing or stale"
	case ProblemCrossOrigin:
		return "The form was sent from another site"
	case ProblemLinkUsed:
		return "The sign-in link cannot be used"
	}
	return "Internal server error"
}
