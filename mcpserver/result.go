package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/oncebox/oncebox/outbox"
)

// OpView is the structured content of a tool result: the op as the HTTP API returns
// it, and whether this call was a replay of an earlier one.
type OpView struct {
	ID             string          `json:"id"`
	Key            string          `json:"key"`
	Tool           string          `json:"tool"`
	Status         string          `json:"status"`
	Fingerprint    string          `json:"fingerprint"`
	Attempts       int             `json:"attempts"`
	VendorRef      string          `json:"vendor_ref,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          json.RawMessage `json:"error,omitempty"`
	ConversationID string          `json:"conversation_id,omitempty"`
	ToolCallID     string          `json:"tool_call_id,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	ExpiresAt      time.Time       `json:"expires_at"`
	// Replayed is true when this call found the op already recorded by an earlier one.
	Replayed bool `json:"replayed"`
}

func newOpView(op *outbox.Op, replayed bool) OpView {
	return OpView{
		ID: op.ID, Key: op.Key, Tool: op.Tool, Status: string(op.Status), Fingerprint: op.Fingerprint.String(),
		Attempts: op.Attempts, VendorRef: op.VendorRef, Result: op.Result, Error: op.Error,
		ConversationID: op.ConversationID, ToolCallID: op.ToolCallID,
		CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt, ExpiresAt: op.ExpiresAt, Replayed: replayed,
	}
}

// describe tells the model plainly what happened to its tool call.
func describe(op *outbox.Op, replayed bool, id callIdentity, wait string) string {
	var b strings.Builder
	if replayed {
		fmt.Fprintf(&b, "ALREADY DONE EARLIER: this same %s call was already made earlier in this conversation; it was NOT repeated now. ", op.Tool)
	}
	switch op.Status {
	case outbox.StatusSucceeded:
		if replayed {
			b.WriteString("The earlier call succeeded")
		} else {
			fmt.Fprintf(&b, "DONE: the %s call was executed now and the vendor confirmed it", op.Tool)
		}
		if op.VendorRef != "" {
			fmt.Fprintf(&b, " (vendor reference %s)", op.VendorRef)
		}
		b.WriteString(". Do not call it again for the same purpose.")
		if len(op.Result) > 0 {
			fmt.Fprintf(&b, " Vendor result: %s", compact(op.Result))
		}
	case outbox.StatusFailed:
		fmt.Fprintf(&b, "FAILED: the vendor refused the %s call, so nothing was done. Reason: %s. "+
			"Calling again with the same arguments gives the same answer; change the arguments or tell the user.",
			op.Tool, failureReason(op.Error))
	case outbox.StatusRejected:
		b.WriteString("REJECTED: a person rejected this action; it was NOT executed and will not be. Do not retry it; tell the user.")
	case outbox.StatusAwaitingApproval:
		b.WriteString("AWAITING APPROVAL: this action needs a person's approval and has NOT been executed yet. " +
			"It will be executed once approved, and not at all if rejected. Do not call the tool again for it; tell the user it awaits approval.")
	case outbox.StatusNeedsReview:
		b.WriteString("NEEDS REVIEW: oncebox could not confirm whether the vendor carried this out, so a person will decide. " +
			"Do NOT retry it (that could do it twice); tell the user it is under review.")
	default: // pending, dispatching, unknown
		fmt.Fprintf(&b, "PENDING: the call is recorded and will be carried out exactly once, but the vendor had not confirmed it "+
			"within %s (status %s). Do NOT call the tool again to retry it. ", wait, op.Status)
		if id.ToolCallID == "" {
			b.WriteString("To check on it, call this tool again with exactly the same arguments in this conversation: " +
				"that reports its status and does not repeat it.")
		} else {
			fmt.Fprintf(&b, "An operator can check it with GET /v1/ops/%s.", op.Key)
		}
	}
	fmt.Fprintf(&b, " (op key %s, status %s)", op.Key, op.Status)
	return b.String()
}

// failureReason summarizes an op's stored error for the model.
func failureReason(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "no reason given"
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		if e.Code != "" {
			return e.Message + " (" + e.Code + ")"
		}
		return e.Message
	}
	return compact(raw)
}

// compact returns raw JSON without insignificant white space.
func compact(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}
