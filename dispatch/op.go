package dispatch

import (
	"encoding/json"
	"time"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/protocol"
)

// opRow is the op a run dispatches, as it reads the op's row (opstate.OpColumns).
type opRow struct {
	ID                string
	TenantID          int64
	Key               string
	Tool              string
	Vendor            string
	Args              json.RawMessage
	Status            protocol.Status
	Attempts          int
	VendorKey         string
	VendorRef         string
	ConversationID    string
	ToolCallID        string
	DispatchStartedAt *time.Time
	TraceParent       string
	VendorAccount     string

	// actingTrace is the traceparent of the span acting on the op (a dispatch attempt's).
	actingTrace string
	scan        *scanTarget
}

// scanTarget holds the columns of opColumns while they are scanned, the ones dispatch
// does not use included.
type scanTarget struct {
	status     string
	fp         []byte
	generation int
	result     json.RawMessage
	errJSON    json.RawMessage
	createdAt  time.Time
	updatedAt  time.Time
	expiresAt  time.Time
}

// scanDest is where the columns of opColumns are scanned to, in their order.
func (op *opRow) scanDest() []any {
	op.scan = &scanTarget{}
	s := op.scan
	return []any{&op.ID, &op.TenantID, &op.Key, &op.Tool, &op.Vendor, &op.Args, &s.fp, &s.status,
		&op.Attempts, &s.generation, &op.VendorKey, &op.VendorRef, &s.result, &s.errJSON,
		&op.ConversationID, &op.ToolCallID, &s.createdAt, &s.updatedAt, &s.expiresAt, &op.DispatchStartedAt, &op.TraceParent,
		&op.VendorAccount}
}

// fromScan finishes a scan into scanDest.
func (op *opRow) fromScan() {
	op.Status = protocol.Status(op.scan.status)
	op.scan = nil
}

// ident names the op for the state machine's log lines and metrics.
func (op *opRow) ident() opstate.Ident {
	return opstate.Ident{ID: op.ID, TenantID: op.TenantID, Key: op.Key, ConversationID: op.ConversationID,
		ToolCallID: op.ToolCallID, Vendor: op.Vendor, Attempts: op.Attempts, VendorRef: op.VendorRef,
		TraceParent: op.logTrace()}
}

// logTrace is the trace context the op's log lines name: the span acting on it, if
// any, or the one it was created under.
func (op *opRow) logTrace() string {
	if op.actingTrace != "" {
		return op.actingTrace
	}
	return op.TraceParent
}

// withNothingSent returns the error JSON errJSON (an object) with the stored error's
// nothing_sent member set (outbox.NothingSentField): none of the op's requests can have
// been carried out by the vendor.
func withNothingSent(errJSON json.RawMessage) json.RawMessage {
	var e map[string]json.RawMessage
	if json.Unmarshal(errJSON, &e) != nil || e == nil {
		e = map[string]json.RawMessage{}
	}
	e[nothingSentField] = json.RawMessage("true")
	out, err := json.Marshal(e)
	if err != nil {
		return errJSON
	}
	return out
}

// nothingSentField is outbox.NothingSentField, the member of an op's stored error that
// says nothing was sent.
const nothingSentField = "nothing_sent"
