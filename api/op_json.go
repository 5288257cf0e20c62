package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/oncebox/oncebox/outbox"
)

// opJSON is the op as the API shows it, without result and error (written verbatim
// by renderOp) and without args (they may be redacted or personal).
type opJSON struct {
	ID             string    `json:"id"`
	Key            string    `json:"key"`
	Tool           string    `json:"tool"`
	Status         string    `json:"status"`
	Fingerprint    string    `json:"fingerprint"`
	Attempts       int       `json:"attempts"`
	VendorRef      string    `json:"vendor_ref"`
	ConversationID string    `json:"conversation_id"`
	ToolCallID     string    `json:"tool_call_id"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	ExpiresAt      time.Time `json:"expires_at"`
}

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

// renderOp returns the op's JSON. result and error are the stored bytes, untouched
// (encoding/json would compact and re-escape them), so a replayed terminal answer is
// byte for byte the stored one.
func renderOp(op *outbox.Op, h *outbox.History) ([]byte, error) {
	head, err := json.Marshal(opJSON{
		ID:             op.ID,
		Key:            op.Key,
		Tool:           op.Tool,
		Status:         string(op.Status),
		Fingerprint:    op.Fingerprint.String(),
		Attempts:       op.Attempts,
		VendorRef:      op.VendorRef,
		ConversationID: op.ConversationID,
		ToolCallID:     op.ToolCallID,
		CreatedAt:      op.CreatedAt.UTC(),
		UpdatedAt:      op.UpdatedAt.UTC(),
		ExpiresAt:      op.ExpiresAt.UTC(),
	})
	if err != nil {
		return nil, fmt.Errorf("render op: %w", err)
	}
	out := append(head[:len(head)-1:len(head)-1], `,"result":`...)
	out = appendRaw(out, op.Result)
	out = append(out, `,"error":`...)
	out = appendRaw(out, op.Error)
	if h != nil {
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
		hb, err := json.Marshal(hj)
		if err != nil {
			return nil, fmt.Errorf("render op history: %w", err)
		}
		out = append(out, `,"history":`...)
		out = append(out, hb...)
	}
	return append(out, '}', '\n'), nil
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
