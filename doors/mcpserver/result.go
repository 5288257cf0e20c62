package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
)

// OpView is the structured content of a tool result: the op as the HTTP API returns
// it, and whether this call was a replay of an earlier one.
type OpView struct {
	protocol.Op
	// Replayed is true when this call found the op already recorded by an earlier one.
	Replayed bool `json:"replayed"`
	// Matched is set when this call was matched to the op by its tool's identity fields
	// although other arguments differ, and was not executed.
	Matched *MatchView `json:"matched,omitempty"`
	// Message is the result's text, the sentence that says what happened: some clients
	// hand the model the structured content instead of the text (Mastra's MCP client).
	Message string `json:"message"`
	// ApprovalURL is the console page where a person approves or rejects the op, while
	// it waits for approval and the console's URL is configured.
	ApprovalURL string `json:"approval_url,omitempty"`
}

// MatchView says how a call was matched to an op by its tool's identity fields.
type MatchView struct {
	// Identity are the tool's identity fields, the same in the call and the op.
	Identity []string `json:"identity"`
	// Differed are the call's arguments that differ from the op's (empty when they
	// could not be compared).
	Differed []string `json:"differed"`
}

func newOpView(op *outbox.Op, replayed bool, m *outbox.IdentityMatch, identity []string) OpView {
	var mv *MatchView
	if m != nil {
		mv = &MatchView{Identity: nonNil(identity), Differed: nonNil(m.Differed)}
	}
	return OpView{
		Matched:  mv,
		Op:       op.Wire(),
		Replayed: replayed,
	}
}

// describe tells the model plainly what happened to its tool call: one sentence for
// the state, whether this call made the op or found it made by an earlier one, then
// what to do next.
func describe(op *outbox.Op, replayed bool, id callIdentity, wait string) string {
	var b strings.Builder
	what := actionOf(op.Tool)
	if replayed {
		fmt.Fprintf(&b, "This %s was already requested earlier and was not repeated now: ", what)
		switch op.Status {
		case protocol.StatusSucceeded:
			b.WriteString("it was carried out then")
			if op.VendorRef != "" {
				fmt.Fprintf(&b, " (vendor reference %s)", op.VendorRef)
			}
			b.WriteString(". Do not call the tool again for it.")
			if len(op.Result) > 0 {
				fmt.Fprintf(&b, " Vendor result: %s.", compact(op.Result))
			}
			fmt.Fprintf(&b, " Only if the user explicitly asks to do the same thing once more, call the tool again with the same arguments and \"occurrence\": %d.",
				id.Occurrence+1)
		case protocol.StatusFailed:
			fmt.Fprintf(&b, "the vendor refused it then, so nothing was carried out (reason: %s). "+
				"Calling again with the same arguments gives the same answer; change the arguments or tell the user.", failureReason(op.Error))
		case protocol.StatusRejected:
			b.WriteString(rejectedBy(op) + " rejected it, so it was not carried out and will not be. Do not retry it; tell the user.")
		case protocol.StatusAwaitingApproval:
			b.WriteString("it is waiting for a person's approval and has not been carried out. Do not call the tool again for it; tell the user it awaits approval.")
		case protocol.StatusNeedsReview:
			b.WriteString("it " + reviewSentence(op))
		default:
			fmt.Fprintf(&b, "the vendor has not confirmed it yet (status %s); it will be carried out at most once. %s", op.Status, pendingAdvice(op, id))
		}
	} else {
		switch op.Status {
		case protocol.StatusSucceeded:
			fmt.Fprintf(&b, "Done: this %s was carried out now and the vendor confirmed it", what)
			if op.VendorRef != "" {
				fmt.Fprintf(&b, " (vendor reference %s)", op.VendorRef)
			}
			b.WriteString(". Do not call the tool again for it.")
			if len(op.Result) > 0 {
				fmt.Fprintf(&b, " Vendor result: %s.", compact(op.Result))
			}
		case protocol.StatusFailed:
			fmt.Fprintf(&b, "Not done: the vendor refused this %s, so nothing was carried out (reason: %s). "+
				"Calling again with the same arguments gives the same answer; change the arguments or tell the user.", what, failureReason(op.Error))
		case protocol.StatusRejected:
			fmt.Fprintf(&b, "Not done: %s rejected this %s, so it was not carried out and will not be. Do not retry it; tell the user.", rejectedBy(op), what)
		case protocol.StatusAwaitingApproval:
			fmt.Fprintf(&b, "Waiting for approval: this %s needs a person's approval and has not been carried out; "+
				"it will be once approved, and not at all if rejected. Do not call the tool again for it; tell the user it awaits approval.", what)
		case protocol.StatusNeedsReview:
			fmt.Fprintf(&b, "Held for review: this %s ", what)
			b.WriteString(reviewSentence(op))
		default:
			fmt.Fprintf(&b, "Not confirmed yet: this %s is recorded and will be carried out at most once, but the vendor had not confirmed it within %s (status %s). %s",
				what, wait, op.Status, pendingAdvice(op, id))
		}
	}
	fmt.Fprintf(&b, " (op key %s, status %s)", op.Key, op.Status)
	return b.String()
}

// describeMatch tells the model, in one sentence, that its call asks for an operation
// already requested (same identity fields, other wording), when, where that operation
// stands, and that occurrence asks for a deliberate second one; then the op's key and
// status, as describe does.
func describeMatch(op *outbox.Op, m *outbox.IdentityMatch, identity []string, id callIdentity) string {
	var b strings.Builder
	what := actionOf(op.Tool)
	fmt.Fprintf(&b, "Not done again: the same %s (same %s) was already requested at %s", what, list(identity),
		op.CreatedAt.UTC().Format(time.RFC3339))
	if len(m.Differed) > 0 {
		fmt.Fprintf(&b, ", worded differently (%s differed)", list(m.Differed))
	}
	b.WriteString(", so this call was not executed; ")
	switch op.Status {
	case protocol.StatusSucceeded:
		b.WriteString("that one was carried out")
		if op.VendorRef != "" {
			fmt.Fprintf(&b, " (vendor reference %s)", op.VendorRef)
		}
	case protocol.StatusFailed:
		fmt.Fprintf(&b, "the vendor refused that one (reason: %s)", failureReason(op.Error))
	case protocol.StatusRejected:
		b.WriteString(rejectedBy(op) + " rejected that one")
	case protocol.StatusAwaitingApproval:
		b.WriteString("that one is waiting for a person's approval")
	case protocol.StatusNeedsReview:
		b.WriteString("that one is held for a person's review")
	default:
		fmt.Fprintf(&b, "that one is recorded and the vendor has not confirmed it yet (status %s)", op.Status)
	}
	fmt.Fprintf(&b, "; only if the user explicitly asks for a second, separate %s, call again with \"occurrence\": %d.", what, id.Occurrence+1)
	fmt.Fprintf(&b, " (op key %s, status %s)", op.Key, op.Status)
	return b.String()
}

// list joins names for a sentence: "a", "a and b", "a, b and c".
func list(names []string) string {
	switch len(names) {
	case 0:
		return "arguments"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// nonNil returns s, or an empty slice for nil (JSON [] rather than null).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// reviewSentence says of an op held for review whether anything may have been sent.
func reviewSentence(op *outbox.Op) string {
	if op.NothingSent() {
		return "is held for a person's review and was NOT sent to the vendor, so nothing was carried out. " +
			"Do not call the tool again for it; tell the user it is held for review."
	}
	return "is held for a person's review because oncebox could not confirm whether the vendor carried it out, so it may have been done. " +
		"Do not call the tool again (that could do it twice); tell the user it is under review."
}

// pendingAdvice tells the model how to follow an op that is not settled yet.
func pendingAdvice(op *outbox.Op, id callIdentity) string {
	if id.ToolCallID != "" {
		return fmt.Sprintf("Do not call the tool again to retry it; an operator can check it with GET /v1/ops/%s.", op.Key)
	}
	return "Do not call the tool again to retry it; calling it again with exactly the same arguments only reports its status."
}

// actionOf names what a tool does, for the model.
func actionOf(tool string) string {
	switch tool {
	case protocol.ToolPaymentIntent:
		return "payment"
	case protocol.ToolRefund:
		return "refund"
	case protocol.ToolMail:
		return "email"
	case protocol.ToolWebhookPost:
		return "webhook post"
	}
	return tool + " call"
}

// rejectedBy says who rejected an op: a person, or the expiry of its wait for approval.
func rejectedBy(op *outbox.Op) string {
	if strings.Contains(string(op.Error), `"approval_expired"`) {
		return "nobody approved it in time, so the expiry of its approval"
	}
	return "a person"
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
