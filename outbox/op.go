package outbox

import (
	"encoding/json"
	"log/slog"
	"time"
)

// Status is where an op stands in its life.
type Status string

// The states of an op.
const (
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusRejected         Status = "rejected"
	StatusPending          Status = "pending"
	StatusDispatching      Status = "dispatching"
	StatusSucceeded        Status = "succeeded"
	StatusFailed           Status = "failed"
	StatusUnknown          Status = "unknown"
	StatusNeedsReview      Status = "needs_review"
)

// Terminal reports whether the op's result is final and will be replayed as it is.
func (s Status) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusRejected
}

// Settled reports whether nothing will happen to the op without a person: it is terminal,
// awaits approval, or needs review.
func (s Status) Settled() bool {
	return s.Terminal() || s == StatusNeedsReview || s == StatusAwaitingApproval
}

// Op is one side effect requested under an idempotency key.
type Op struct {
	ID             string
	TenantID       int64
	Key            string
	Tool           string
	Vendor         string
	Args           json.RawMessage
	Fingerprint    Fingerprint
	Status         Status
	Attempts       int
	Generation     int
	VendorKey      string
	VendorRef      string
	Result         json.RawMessage
	Error          json.RawMessage
	ConversationID string
	ToolCallID     string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ExpiresAt      time.Time
	// DispatchStartedAt is when the latest dispatch attempt started, if any.
	DispatchStartedAt *time.Time

	scan *scanTarget
}

// Attempt is one dispatch attempt of an op, for support's history.
type Attempt struct {
	Attempt    int
	Token      string
	VendorKey  string
	JobID      int64
	StartedAt  time.Time
	FinishedAt *time.Time
	Outcome    string
	Error      string
	VendorRef  string
}

// Event is a decision recorded about an op outside a dispatch attempt: a reconcile
// decision, an approval, a manual resolution.
type Event struct {
	At         time.Time
	Kind       string
	FromStatus string
	ToStatus   string
	Actor      string
	Detail     json.RawMessage
}

// LogAttrs returns the attributes a log line about the op carries: tenant, op_id,
// idempotency_key, conversation_id, tool_call_id, vendor, attempt (attempts so far) and
// vendor_ref. Use it as logger.With(outbox.LogAttrs(op)...).
func LogAttrs(op *Op) []any {
	return append(identityAttrs(op), slog.Int("attempt", op.Attempts), slog.String("vendor_ref", op.VendorRef))
}

// identityAttrs are the attributes that name the op in a log line, without the ones a
// dispatch adds as it goes (attempt, vendor_ref).
func identityAttrs(op *Op) []any {
	return []any{
		slog.Int64("tenant", op.TenantID), slog.String("op_id", op.ID), slog.String("idempotency_key", op.Key),
		slog.String("conversation_id", op.ConversationID), slog.String("tool_call_id", op.ToolCallID),
		slog.String("vendor", op.Vendor),
	}
}
