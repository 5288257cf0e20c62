package protocol

import (
	"encoding/json"
	"time"
)

// Op is an op as the HTTP API returns it (POST /v1/ops, GET /v1/ops/{key}): what the
// Go client decodes and an MCP tool result carries as its structured content.
// Encoded with encoding/json, it leaves out the empty optional members (an MCP tool
// result); the HTTP API sends every member, in this order with Result and Error last.
type Op struct {
	ID  string `json:"id"`
	Key string `json:"key"`
	// Tool is the name of the tool called, such as "stripe.payment_intent".
	Tool string `json:"tool"`
	// Status is where the op stands, one of the Status values (a plain string, so
	// that it compares with a string literal).
	Status string `json:"status"`
	// Fingerprint is the hex SHA-256 that identifies the call's payload.
	Fingerprint string `json:"fingerprint"`
	// Attempts is how many times the vendor was called.
	Attempts int `json:"attempts"`
	// VendorRef is the vendor's id of the object made, such as "pi_123".
	VendorRef string `json:"vendor_ref,omitempty"`
	// Result is the vendor's stored answer once the op succeeded, byte for byte.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the stored failure once the op failed.
	Error json.RawMessage `json:"error,omitempty"`
	// ConversationID ties the op to the agent's conversation, if the call named one.
	ConversationID string `json:"conversation_id,omitempty"`
	// ToolCallID is the model's id of the tool call, if the call named one.
	ToolCallID string    `json:"tool_call_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// ExpiresAt is when a terminal op may be purged; for an op not yet terminal, a
	// lower bound.
	ExpiresAt time.Time `json:"expires_at"`
	// Why says in one sentence why the op waits for a person, while it awaits
	// approval; empty otherwise.
	Why string `json:"why,omitempty"`
	// Steps lists the ops of a composite op's steps (docs/steps.md), in order, then its
	// compensations; empty for any other op.
	Steps []StepRef `json:"steps,omitempty"`
}

// StepRef is one step of a composite op and its op.
type StepRef struct {
	// Name is the step's name; a compensation's is "undo.<step>".
	Name string `json:"name"`
	// Key is the step op's idempotency key, derived from the parent's op id.
	Key string `json:"key"`
	// OpID and Status are the step's op's, once it has one ("" before; Status
	// "not_run" then).
	OpID   string `json:"op_id,omitempty"`
	Status string `json:"status"`
}
