package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// AgentSession mints idempotency keys for one agent conversation deterministically,
// so a re-run of the same tool call sends the same key.
type AgentSession struct {
	c  *Client
	id string
}

// Session returns the AgentSession of a conversation. sessionID must be stable for
// the conversation (the framework's thread or run id) and unique across conversations.
func (c *Client) Session(sessionID string) *AgentSession {
	return &AgentSession{c: c, id: sessionID}
}

// ID returns the session id.
func (s *AgentSession) ID() string { return s.id }

// Key returns the idempotency key of a tool call: the same session and tool call id
// always give the same key, "as_" and 40 hex digits.
func (s *AgentSession) Key(toolCallID string) string {
	return sessionKey(s.id, "call", toolCallID)
}

// KeyForIndex returns the idempotency key of the i-th side effect of the session, for
// frameworks without tool call ids. The caller must number side effects the same way
// on every re-run.
func (s *AgentSession) KeyForIndex(i int) string {
	return sessionKey(s.id, "index", strconv.Itoa(i))
}

// Call records a tool call of the session: the key is Key(toolCallID), the
// conversation id is the session id and the tool call id is toolCallID, unless opts
// set them.
func (s *AgentSession) Call(ctx context.Context, toolCallID, tool string, args any, opts *Opts) (*Response, error) {
	o := Opts{}
	if opts != nil {
		o = *opts
	}
	if o.ConversationID == "" {
		o.ConversationID = s.id
	}
	if o.ToolCallID == "" {
		o.ToolCallID = toolCallID
	}
	return s.c.Enqueue(ctx, s.Key(toolCallID), tool, args, &o)
}

// CallIndex records the i-th side effect of the session, for frameworks without tool
// call ids: the key is KeyForIndex(i) and the conversation id is the session id,
// unless opts set it. The caller must number side effects the same way on every re-run.
func (s *AgentSession) CallIndex(ctx context.Context, i int, tool string, args any, opts *Opts) (*Response, error) {
	o := Opts{}
	if opts != nil {
		o = *opts
	}
	if o.ConversationID == "" {
		o.ConversationID = s.id
	}
	return s.c.Enqueue(ctx, s.KeyForIndex(i), tool, args, &o)
}

func sessionKey(session, kind, id string) string {
	h := sha256.New()
	h.Write([]byte(session))
	h.Write([]byte{0})
	if kind != "call" {
		h.Write([]byte{1})
		h.Write([]byte(kind))
		h.Write([]byte{0})
	}
	h.Write([]byte(id))
	return "as_" + hex.EncodeToString(h.Sum(nil))[:40]
}
