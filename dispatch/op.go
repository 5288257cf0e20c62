package dispatch

import (
	"encoding/json"

	"github.com/oncebox/oncebox/internal/opstate"
)

// opRow is the op a run dispatches, as it reads the op's row (opstate.Row, the one
// scan of OpColumns).
type opRow struct {
	opstate.Row

	// actingTrace is the traceparent of the span acting on the op (a dispatch attempt's).
	actingTrace string
}

// scanDest is where the columns of OpColumns are scanned to, in their order.
func (op *opRow) scanDest() []any { return op.Row.Dest() }

// fromScan finishes a scan into scanDest.
func (op *opRow) fromScan() { op.Row.Finish() }

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
// nothing_sent member set (opstate.NothingSentField): none of the op's requests can have
// been carried out by the vendor.
func withNothingSent(errJSON json.RawMessage) json.RawMessage {
	var e map[string]json.RawMessage
	if json.Unmarshal(errJSON, &e) != nil || e == nil {
		e = map[string]json.RawMessage{}
	}
	e[opstate.NothingSentField] = json.RawMessage("true")
	out, err := json.Marshal(e)
	if err != nil {
		return errJSON
	}
	return out
}
