package outbox

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/protocol"
)

// Op is one side effect requested under an idempotency key.
type Op struct {
	ID             string
	TenantID       int64
	Key            string
	Tool           string
	Vendor         string
	Args           json.RawMessage
	Fingerprint    Fingerprint
	Status         protocol.Status
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
	// ExpiresAt is when a terminal op may be purged (its TTL runs from the moment it
	// became terminal); for an op not yet terminal, a lower bound.
	ExpiresAt time.Time
	// DispatchStartedAt is when the latest dispatch attempt started, if any.
	DispatchStartedAt *time.Time
	// TraceParent is the W3C traceparent the op was created under: its enqueue's span,
	// or the caller's trace context when oncebox does not trace ("" when neither).
	TraceParent string
	// VendorAccount is the vendor account the op was accepted under, from its tenant's
	// vendor settings at enqueue (VendorSettings): "" for the installation's, a Stripe
	// Connect account ("acct_…"), or KeyRefPrefix and the fingerprint of the tenant's
	// own key. Every dispatch and lookup of the op uses it, whatever the settings become.
	VendorAccount string
	// Steps are a composite op's steps and their ops (docs/steps.md), as Get reads
	// them; nil for any other op.
	Steps []protocol.StepRef

	// actingTrace is the traceparent of the span acting on the op (a dispatch attempt's).
	actingTrace string
	scan        *opstate.Row
}

// Wire is the op as the wire carries it (protocol.Op), over HTTP and MCP alike, its
// times in UTC.
func (op *Op) Wire() protocol.Op {
	return protocol.Op{
		ID: op.ID, Key: op.Key, Tool: op.Tool, Status: string(op.Status), Fingerprint: op.Fingerprint.String(),
		Attempts: op.Attempts, VendorRef: op.VendorRef, Result: op.Result, Error: op.Error,
		ConversationID: op.ConversationID, ToolCallID: op.ToolCallID,
		CreatedAt: op.CreatedAt.UTC(), UpdatedAt: op.UpdatedAt.UTC(), ExpiresAt: op.ExpiresAt.UTC(), Steps: op.Steps,
	}
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
func LogAttrs(op *Op) []any { return op.ident().LogAttrs() }

// opLogger is the logger of the lines about op.
func (ob *Outbox) opLogger(op *Op) *slog.Logger {
	return ob.logger.With(op.ident().IdentityAttrs()...)
}

// ident names the op for the state machine's log lines and metrics.
func (op *Op) ident() opstate.Ident {
	return opstate.Ident{ID: op.ID, TenantID: op.TenantID, Key: op.Key, ConversationID: op.ConversationID,
		ToolCallID: op.ToolCallID, Vendor: op.Vendor, Attempts: op.Attempts, VendorRef: op.VendorRef,
		TraceParent: op.logTrace()}
}

// NothingSentField is the member of an op's stored error that is true when none of
// the op's requests can have been carried out by the vendor (it was held for review
// before anything went out, or after requests that all failed before the vendor acted).
const NothingSentField = opstate.NothingSentField

// NothingSent reports whether the op's stored error says that none of its requests can
// have been carried out by the vendor. It is false whenever that is not known.
func (op *Op) NothingSent() bool {
	if len(op.Error) == 0 {
		return false
	}
	var e map[string]json.RawMessage
	if json.Unmarshal(op.Error, &e) != nil {
		return false
	}
	return string(e[NothingSentField]) == "true"
}
