package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
)

// historyJSON is the "history" member added by ?history=true.
type historyJSON struct {
	TraceID         string        `json:"trace_id"`
	Attempts        []attemptJSON `json:"attempts"`
	Events          []eventJSON   `json:"events"`
	IdentityMatches []matchJSON   `json:"identity_matches"`
}

// matchJSON is an MCP call matched to the op by its tool's identity fields, not
// executed.
type matchJSON struct {
	At             time.Time `json:"at"`
	Differed       []string  `json:"differed"`
	Fingerprint    string    `json:"fingerprint"`
	ConversationID string    `json:"conversation_id"`
	ToolCallID     string    `json:"tool_call_id"`
}

type attemptJSON struct {
	Attempt    int        `json:"attempt"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Outcome    string     `json:"outcome"`
	Error      string     `json:"error"`
	VendorRef  string     `json:"vendor_ref"`
	VendorKey  string     `json:"vendor_key"`
}

type eventJSON struct {
	At         time.Time       `json:"at"`
	Kind       string          `json:"kind"`
	FromStatus string          `json:"from_status"`
	ToStatus   string          `json:"to_status"`
	Actor      string          `json:"actor"`
	Detail     json.RawMessage `json:"detail"`
}

// opMember is a member of protocol.Op: its JSON name, its field's index, and whether
// it holds stored JSON (result and error).
type opMember struct {
	name   string
	index  int
	stored bool
}

// opMembers are protocol.Op's members as the HTTP API sends them: in protocol.Op's
// order, those of stored JSON last, and every one of them, empty or not (protocol.Op's
// omitempty is for an MCP tool result).
var opMembers = func() []opMember {
	typ, raw := reflect.TypeFor[protocol.Op](), reflect.TypeFor[json.RawMessage]()
	var members, stored []opMember
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type == raw {
			stored = append(stored, opMember{name: name, index: i, stored: true})
		} else {
			members = append(members, opMember{name: name, index: i})
		}
	}
	return append(members, stored...)
}()

// renderOp returns the op's JSON, with why (protocol.Op.Why) and, when h is not nil,
// its history.
func renderOp(op *outbox.Op, h *outbox.History, why string) ([]byte, error) {
	wire := op.Wire()
	wire.Why = why
	out, err := appendOp([]byte{'{'}, wire)
	if err != nil {
		return nil, err
	}
	if h != nil {
		hb, err := json.Marshal(historyOf(op, h))
		if err != nil {
			return nil, fmt.Errorf("render op history: %w", err)
		}
		out = append(out, `,"history":`...)
		out = append(out, hb...)
	}
	return append(out, '}', '\n'), nil
}

// appendOp appends the op's members (opMembers). result and error are the stored
// bytes, untouched (encoding/json would compact and re-escape them), so a replayed
// terminal answer is byte for byte the stored one.
func appendOp(out []byte, op protocol.Op) ([]byte, error) {
	v := reflect.ValueOf(op)
	first := true
	for _, m := range opMembers {
		if m.name == "steps" && len(op.Steps) == 0 {
			continue // a composite op's only (docs/steps.md)
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(append(append(out, '"'), m.name...), '"', ':')
		field := v.Field(m.index).Interface()
		if m.stored {
			out = appendRaw(out, field.(json.RawMessage))
			continue
		}
		value, err := json.Marshal(field)
		if err != nil {
			return nil, fmt.Errorf("render op: %s: %w", m.name, err)
		}
		out = append(out, value...)
	}
	return out, nil
}

// historyOf is the "history" member of an op.
func historyOf(op *outbox.Op, h *outbox.History) historyJSON {
	hj := historyJSON{TraceID: op.TraceID(), Attempts: []attemptJSON{}, Events: []eventJSON{}, IdentityMatches: []matchJSON{}}
	for _, m := range h.Matches {
		hj.IdentityMatches = append(hj.IdentityMatches, matchJSON{At: m.At.UTC(), Differed: m.Differed,
			Fingerprint: m.Fingerprint.String(), ConversationID: m.ConversationID, ToolCallID: m.ToolCallID})
	}
	for _, a := range h.Attempts {
		hj.Attempts = append(hj.Attempts, attemptJSON{Attempt: a.Attempt, StartedAt: a.StartedAt.UTC(), FinishedAt: utcPtr(a.FinishedAt),
			Outcome: a.Outcome, Error: a.Error, VendorRef: a.VendorRef, VendorKey: a.VendorKey})
	}
	for _, e := range h.Events {
		detail := e.Detail
		if len(detail) == 0 {
			detail = json.RawMessage("null")
		}
		hj.Events = append(hj.Events, eventJSON{At: e.At.UTC(), Kind: e.Kind, FromStatus: e.FromStatus,
			ToStatus: e.ToStatus, Actor: e.Actor, Detail: detail})
	}
	return hj
}

// appendRaw appends a stored JSON value verbatim, or null when there is none.
func appendRaw(out []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 || !json.Valid(raw) {
		return append(out, "null"...)
	}
	return append(out, raw...)
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// writeOp writes the op with the given status.
func writeOp(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
