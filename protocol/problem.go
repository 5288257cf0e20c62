package protocol

// ProblemBase is the prefix of every problem type of the HTTP API.
const ProblemBase = "https://oncebox.dev/problems/"

// The problem types of the HTTP API: the "type" member of every
// application/problem+json refusal. They are stable; a client tells refusals apart by
// them (and by the status code), never by the title or the detail.
const (
	ProblemMissingKey           = ProblemBase + "missing-idempotency-key"
	ProblemInvalidKey           = ProblemBase + "invalid-idempotency-key"
	ProblemUnauthorized         = ProblemBase + "unauthorized"
	ProblemInvalidJSON          = ProblemBase + "invalid-json"
	ProblemUnsupportedMediaType = ProblemBase + "unsupported-media-type"
	ProblemPayloadTooLarge      = ProblemBase + "payload-too-large"
	ProblemUnknownTool          = ProblemBase + "unknown-tool"
	ProblemInvalidArgs          = ProblemBase + "invalid-args"
	ProblemKeyConflict          = ProblemBase + "key-conflict"
	ProblemInvalidRequest       = ProblemBase + "invalid-request"
	ProblemForbidden            = ProblemBase + "forbidden"
	ProblemNotFound             = ProblemBase + "not-found"
	ProblemWrongState           = ProblemBase + "wrong-state"
	ProblemInvalidWait          = ProblemBase + "invalid-wait"
	ProblemNoRoute              = ProblemBase + "no-route"
	ProblemMethodNotAllowed     = ProblemBase + "method-not-allowed"
	ProblemTooManyWaits         = ProblemBase + "too-many-waits"
	ProblemStoreUnavailable     = ProblemBase + "store-unavailable"
	ProblemPolicyChanged        = ProblemBase + "policy-changed"
	ProblemBudgetExceeded       = ProblemBase + "budget-exceeded"
	ProblemFingerprintMismatch  = ProblemBase + "fingerprint-mismatch"
	// ProblemReadFailed: a read tool of the tool catalog got no answer from its target
	// (502); nothing was recorded or changed.
	ProblemReadFailed = ProblemBase + "read-failed"

	// The refusals of the vendor event endpoints (POST /v1/vendor-events/…).
	ProblemInvalidSignature          = ProblemBase + "invalid-signature"
	ProblemInvalidEvent              = ProblemBase + "invalid-event"
	ProblemVendorEventsNotConfigured = ProblemBase + "vendor-events-not-configured"
)

// ProblemTitle returns the title of a problem type, and "Internal server error" for a
// type this package does not define.
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
		return "Op not found"
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
	case ProblemStoreUnavailable:
		return "The database is unavailable"
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
	}
	return "Internal server error"
}
