package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncebox/oncebox/outbox"
)

// The _meta keys a client may send to identify a tool call. The namespaced forms are
// preferred; the bare ones are accepted too.
const (
	MetaConversationID = "oncebox/conversation_id"
	MetaToolCallID     = "oncebox/tool_call_id"
)

// callIdentity is what the server knows about who makes a tool call.
type callIdentity struct {
	// Conversation is the _meta conversation id, else the MCP session id, else
	// Config.Conversation, else the id of the *mcp.Server instance.
	Conversation string
	// ConversationFromClient is true when the client sent the conversation id.
	ConversationFromClient bool
	// ToolCallID is the _meta tool call id, or "".
	ToolCallID string
}

// identify reads the call's identity from the request; fallback is the conversation
// of a call without _meta or session.
func identify(req *mcp.CallToolRequest, fallback string) callIdentity {
	var id callIdentity
	meta := req.Params.Meta
	id.Conversation = metaString(meta, MetaConversationID, "conversation_id")
	id.ConversationFromClient = id.Conversation != ""
	id.ToolCallID = metaString(meta, MetaToolCallID, "tool_call_id")
	if id.Conversation == "" && req.Session != nil {
		if sid := req.Session.ID(); sid != "" {
			id.Conversation = "session:" + sid
		}
	}
	if id.Conversation == "" {
		id.Conversation = fallback
	}
	return id
}

// metaString returns the first non-empty string among meta's values for keys.
func metaString(meta mcp.Meta, keys ...string) string {
	for _, k := range keys {
		if v, ok := meta[k].(string); ok {
			if v = strings.TrimSpace(v); v != "" {
				return v
			}
		}
	}
	return ""
}

// mintKey derives the idempotency key of a tool call: from the conversation and the
// tool call id when there is one, else from the conversation and the payload's
// fingerprint. It is "mcp_" and 48 hex digits.
func mintKey(id callIdentity, fp outbox.Fingerprint) string {
	h := sha256.New()
	h.Write([]byte("oncebox/mcp/v1\x00"))
	if id.ToolCallID != "" {
		h.Write([]byte("call\x00" + id.Conversation + "\x00" + id.ToolCallID))
	} else {
		h.Write([]byte("payload\x00" + id.Conversation + "\x00" + fp.String()))
	}
	return "mcp_" + hex.EncodeToString(h.Sum(nil))[:48]
}

// legacyKey returns the key a call of a redacting tool was minted under before such
// tools' fingerprints were keyed (from the plain fingerprint), when an op is stored
// under it, so that a retry spanning the upgrade still replays; otherwise key.
func (s *Server) legacyKey(ctx context.Context, tenantID int64, tool string, args json.RawMessage, id callIdentity, key string) string {
	plain, err := outbox.ComputeFingerprint(tool, args)
	if err != nil {
		return key
	}
	old := mintKey(id, plain)
	if old == key {
		return key // the tool's fingerprints are plain
	}
	if _, err := s.ob.Get(ctx, tenantID, old); err == nil {
		return old
	}
	return key
}

// toolHandler returns the MCP handler of one tool for one tenant.
func (s *Server) toolHandler(tenantID int64, tool, instance string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil {
			if id, ok := tenantOf(req.Extra.TokenInfo); ok && id != tenantID {
				return nil, errors.New("this MCP session belongs to another tenant")
			}
		}
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		id := identify(req, instance)
		fp, err := s.ob.Fingerprint(tool, args)
		if err != nil {
			return errorResult("The arguments are not valid JSON. Nothing was executed. Send a JSON object matching the tool's input schema."), nil
		}
		key := mintKey(id, fp)
		if id.ToolCallID == "" {
			key = s.legacyKey(ctx, tenantID, tool, args, id, key)
		}
		log := s.logger.With(slog.Int64("tenant", tenantID), slog.String("tool", tool),
			slog.String("idempotency_key", key), slog.String("conversation_id", id.Conversation))

		res, err := s.ob.Enqueue(ctx, outbox.EnqueueParams{
			TenantID:       tenantID,
			Key:            key,
			Tool:           tool,
			Args:           args,
			ConversationID: id.Conversation,
			ToolCallID:     id.ToolCallID,
		})
		if err != nil {
			if r := refusal(err); r != nil {
				log.LogAttrs(ctx, slog.LevelDebug, "mcp tool call refused", slog.Any("error", err))
				return r, nil
			}
			log.LogAttrs(ctx, slog.LevelError, "mcp tool call failed", slog.Any("error", err))
			return errorResult("oncebox could not record this call because of an internal error. " +
				"Nothing was executed. It is safe to call the tool again with the same arguments."), nil
		}
		op := res.Op
		if !op.Status.Settled() {
			waited, err := s.ob.Wait(ctx, tenantID, key, s.cfg.Wait)
			if err != nil {
				log.LogAttrs(ctx, slog.LevelWarn, "mcp wait for op failed", slog.Any("error", err))
			} else {
				op = waited
			}
		}
		log.LogAttrs(ctx, slog.LevelDebug, "mcp tool call", slog.String("op_id", op.ID),
			slog.Bool("replayed", res.Replayed), slog.String("status", string(op.Status)))
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: describe(op, res.Replayed, id, s.cfg.Wait.String())}},
			StructuredContent: newOpView(op, res.Replayed),
			IsError:           op.Status == outbox.StatusFailed,
		}, nil
	}
}

// refusal turns an error of Enqueue that the model can act on into a tool error
// result, or returns nil for any other error.
func refusal(err error) *mcp.CallToolResult {
	var (
		ve *outbox.ValidationError
		ke *outbox.KeyConflictError
	)
	switch {
	case errors.As(err, &ke):
		return errorResult("This same tool call was already made earlier with other arguments. " +
			"Nothing was executed now. If you really mean a new, different action, make it as a new tool call.")
	case errors.As(err, &ve):
		field := strings.TrimPrefix(strings.TrimPrefix(ve.Field, "args"), ".")
		if field == "" {
			return errorResult(fmt.Sprintf("Invalid arguments: they %s. Nothing was executed. Fix them and call the tool again.", ve.Message))
		}
		return errorResult(fmt.Sprintf("Invalid argument %q: %s. Nothing was executed. Fix the argument and call the tool again.", field, ve.Message))
	case errors.Is(err, outbox.ErrUnknownTool):
		return errorResult("This tool is not enabled on this oncebox server. Nothing was executed.")
	}
	return nil
}

// errorResult is a tool error result with one text.
func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}
