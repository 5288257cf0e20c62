package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncebox/oncebox/doors/opwait"
	"github.com/oncebox/oncebox/doors/pgavail"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// The _meta keys a client may send to identify a tool call. The namespaced forms are
// preferred; the bare ones are accepted too.
const (
	MetaConversationID = "oncebox/conversation_id"
	MetaToolCallID     = "oncebox/tool_call_id"
)

// HeaderConversationID is the request header that names the conversation of every
// tool call of an HTTP request, for clients that can set headers but not _meta.
// QueryConversationID is the same as a query parameter of the /mcp URL, for clients
// that can set neither. _meta wins over the header, the header over the query.
const (
	HeaderConversationID = "Oncebox-Conversation-Id"
	QueryConversationID  = "conversation_id"
)

// ArgOccurrence is the optional argument every tool takes besides its own: 1 by
// default, raised by the model only when the user asks to do the same thing again.
// It is part of the call's identity, not of the op's arguments.
const ArgOccurrence = "occurrence"

// maxOccurrence bounds ArgOccurrence.
const maxOccurrence = 1000

// callIdentity is what the server knows about who makes a tool call.
type callIdentity struct {
	// Conversation is the conversation the client named (_meta, header, query), else
	// Config.Conversation, else the MCP session id, else the id of the *mcp.Server
	// instance.
	Conversation string
	// Named is true when the conversation was named by the client or by
	// Config.Conversation: calls are then deduplicated within it, not by window.
	Named bool
	// ToolCallID is the _meta tool call id, or "".
	ToolCallID string
	// Occurrence is the call's ArgOccurrence, 1 by default.
	Occurrence int
}

// identify reads the call's identity from the request; configured is
// Config.Conversation, instance the conversation of a call without one.
func identify(req *mcp.CallToolRequest, configured, instance string) callIdentity {
	id := callIdentity{Occurrence: 1}
	meta := req.Params.Meta
	id.Conversation = metaString(meta, MetaConversationID, "conversation_id")
	if id.Conversation == "" && req.Extra != nil && req.Extra.Header != nil {
		id.Conversation = strings.TrimSpace(req.Extra.Header.Get(HeaderConversationID))
	}
	if id.Conversation == "" && configured != "" {
		id.Conversation = "conversation:" + configured
	}
	id.Named = id.Conversation != ""
	id.ToolCallID = metaString(meta, MetaToolCallID, "tool_call_id")
	if id.Conversation == "" && req.Session != nil {
		if sid := req.Session.ID(); sid != "" {
			id.Conversation = "session:" + sid
		}
	}
	if id.Conversation == "" {
		id.Conversation = instance
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

// takeOccurrence removes ArgOccurrence from args and returns it (1 when absent).
func takeOccurrence(args json.RawMessage) (json.RawMessage, int, *mcp.CallToolResult) {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil || m == nil {
		return args, 1, nil // not an object: validation says so
	}
	raw, ok := m[ArgOccurrence]
	if !ok {
		return args, 1, nil
	}
	var n int
	if json.Unmarshal(raw, &n) != nil || n < 1 || n > maxOccurrence {
		return nil, 0, errorResult(fmt.Sprintf("Invalid argument %q: it must be a whole number from 1 to %d (leave it out for 1). "+
			"Nothing was executed. Fix the argument and call the tool again.", ArgOccurrence, maxOccurrence))
	}
	delete(m, ArgOccurrence)
	out, err := json.Marshal(m)
	if err != nil {
		return args, 1, nil
	}
	return out, n, nil
}

// mintKey derives the idempotency key of a tool call in a conversation: from the
// conversation and the tool call id when there is one, else from the conversation,
// the payload's fingerprint and the occurrence. It is "mcp_" and 48 hex digits.
func mintKey(id callIdentity, fp outbox.Fingerprint) string {
	h := sha256.New()
	h.Write([]byte("oncebox/mcp/v1\x00"))
	if id.ToolCallID != "" {
		h.Write([]byte("call\x00" + id.Conversation + "\x00" + id.ToolCallID))
	} else {
		h.Write([]byte("payload\x00" + id.Conversation + "\x00" + fp.String()))
		if id.Occurrence > 1 {
			h.Write([]byte("\x00occurrence\x00" + strconv.Itoa(id.Occurrence)))
		}
	}
	return protocol.MCPKeyPrefix + hex.EncodeToString(h.Sum(nil))[:48]
}

// windowCall identifies a call deduplicated by window: the tool and payload (both in
// the fingerprint) and the occurrence. v0.1.0 opened windows under it; a tool without
// identity fields still does.
func windowCall(fp outbox.Fingerprint, occurrence int) string {
	h := sha256.Sum256([]byte("oncebox/mcp/window/v1\x00" + fp.String() + "\x00" + strconv.Itoa(occurrence)))
	return hex.EncodeToString(h[:])
}

// identityCall identifies the calls of one identity within a window: the tool and its
// identity fields (both in identity, outbox.IdentityFingerprint), the occurrence, and the
// conversation when one is named ("" for calls naming none, shared by the tenant's
// sessions).
func identityCall(identity outbox.Fingerprint, occurrence int, conversation string) string {
	h := sha256.Sum256([]byte("oncebox/mcp/identity/v1\x00" + identity.String() + "\x00" + strconv.Itoa(occurrence) +
		"\x00" + conversation))
	return hex.EncodeToString(h[:])
}

// windowKey is a fresh key for a new window of call: "mcpw_", 32 hex digits of the
// call and 16 random ones.
func windowKey(call string) string {
	return protocol.MCPWindowKeyPrefix + call[:32] + "_" + randomID()[:16]
}

// key returns the idempotency key of a tool call, and whether it was found by the
// tool's identity fields (the op under it may then differ in other arguments). A call
// with a tool call id in a named conversation has the key of that tool call. Otherwise,
// when the tool has a dedupe window, calls of the same identity (Tool.Identity: the
// whole payload for a tool that declares none) and occurrence share a key within the
// window: within their conversation when one is named, else across the tenant's
// sessions and processes. With the window off, the key is minted from the payload,
// within the conversation, the MCP session or the stdio process.
//
// The first call of an identity in a named conversation gets the key minted from its
// payload, as v0.1.0 minted it, and an identical call outside a conversation the key of
// the window v0.1.0 would have opened, so that a retry crossing a rolling upgrade from
// v0.1.0, either way, finds the same op. That compatibility serves v0.1.0 and goes with
// its support (CHANGELOG.md).
func (s *Server) key(ctx context.Context, tenantID int64, tool string, args json.RawMessage, id callIdentity, fp outbox.Fingerprint) (string, bool, error) {
	window := s.window(tool)
	if window <= 0 || (id.Named && id.ToolCallID != "") {
		return mintKey(id, fp), false, nil
	}
	identity, declared, err := s.ob.IdentityFingerprint(tool, args)
	if err != nil {
		return "", false, err
	}
	if id.Named {
		if !declared {
			return mintKey(id, fp), false, nil
		}
		call := identityCall(identity, id.Occurrence, id.Conversation)
		key, err := s.ob.KeyByIdentity(ctx, tenantID, call, "", mintKey(id, fp), window)
		return key, true, err
	}
	payload := windowCall(fp, id.Occurrence)
	if !declared {
		key, err := s.ob.KeyInWindow(ctx, tenantID, payload, windowKey(payload), window)
		return key, false, err
	}
	call := identityCall(identity, id.Occurrence, "")
	key, err := s.ob.KeyByIdentity(ctx, tenantID, call, payload, windowKey(call), window)
	return key, true, err
}

// identity returns the identity fields of tool (nil: none) that args holds.
func (s *Server) identity(tool string, args json.RawMessage) []string {
	t, _ := s.ob.Tools().Lookup(tool)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(args, &m)
	var out []string
	for _, f := range t.Identity {
		if _, ok := m[f]; ok {
			out = append(out, f)
		}
	}
	return out
}

// window returns the dedupe window of tool: the one configured for it, else
// DefaultDedupeWindow, or the tool's TTL when shorter (an op purged while its window
// is open would let the same call run again).
func (s *Server) window(tool string) time.Duration {
	return s.extra.Load().window(s.ob.Tools(), tool)
}

// toolHandler returns the MCP handler of one tool for one tenant.
func (s *Server) toolHandler(tenantID int64, tool, instance string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil {
			if id, ok := tenantOf(req.Extra.TokenInfo); ok && id != tenantID {
				return nil, errors.New("this MCP session belongs to another tenant")
			}
		}
		// A call's own trace context (_meta traceparent) is its parent; else the HTTP
		// request's, if the transport passed it on.
		ctx = tracing.FromValues(ctx, metaString(req.Params.Meta, "traceparent"), metaString(req.Params.Meta, "tracestate"))
		return s.callTool(ctx, req, tenantID, tool, instance)
	}
}

// callTool records one tool call as an op, waits a while for it to settle, and says
// what became of it.
func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest, tenantID int64, tool, instance string) (*mcp.CallToolResult, error) {
	id := identify(req, s.cfg.Conversation, instance)
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	args, occurrence, bad := takeOccurrence(args)
	if bad != nil {
		return bad, nil
	}
	id.Occurrence = occurrence
	log := s.logger.With(slog.Int64("tenant", tenantID), slog.String("tool", tool), slog.String("conversation_id", id.Conversation))
	var tokenID int64
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		tokenID, _ = req.Extra.TokenInfo.Extra[tokenIDKey].(int64)
	}
	// The call is validated, and fingerprinted, once: before a key window is opened for
	// a call that cannot be recorded, and the key is derived from that fingerprint.
	p, err := s.ob.PrepareUnkeyed(outbox.EnqueueParams{TenantID: tenantID, Tool: tool, Args: args,
		ConversationID: id.Conversation, SessionConversation: !id.Named, ToolCallID: id.ToolCallID, TokenID: tokenID})
	if unfingerprintable(err) {
		return errorResult("The arguments are not valid JSON. Nothing was executed. Send a JSON object matching the tool's input schema."), nil
	}
	if err != nil {
		return s.failure(ctx, log, err)
	}
	key, byIdentity, err := s.key(ctx, tenantID, tool, p.Args, id, p.Fingerprint)
	if err == nil {
		p, err = p.WithKey(key, byIdentity)
	}
	if err != nil {
		return s.failure(ctx, log, err)
	}
	log = log.With(slog.String("idempotency_key", key))
	res, err := s.ob.EnqueuePrepared(ctx, p)
	if err != nil {
		return s.failure(ctx, log, err)
	}
	op := res.Op
	if tc, ok := ctx.Value(taskCallKey{}).(*taskCall); ok {
		// A task call answers at once: the client polls tasks/get.
		tc.op = op
	} else {
		op = s.awaitSettled(ctx, log, tenantID, key, res.Op)
	}
	log.Log(ctx, slog.LevelDebug, "mcp tool call", append(tracing.LogAttrs(op.TraceParent), slog.String("op_id", op.ID),
		slog.Bool("replayed", res.Replayed), slog.String("status", string(op.Status)))...)
	return s.callResult(tool, p.Args, id, res, op), nil
}

// unfingerprintable says whether err refuses arguments that are not JSON a
// fingerprint can be computed of.
func unfingerprintable(err error) bool {
	var ve *vendorapi.ValidationError
	return errors.As(err, &ve) && ve.Field == "args" &&
		(ve.Message == "is not valid JSON" || strings.HasPrefix(ve.Message, "fingerprint:"))
}

// awaitSettled waits, up to Config.Wait, for an op that is not settled to settle, and
// returns it as it then stands. The wait counts against the tenant's cap shared with
// the HTTP API's ?wait=; past it the call answers at once with the op as it stands.
func (s *Server) awaitSettled(ctx context.Context, log *slog.Logger, tenantID int64, key string, op *outbox.Op) *outbox.Op {
	if op.Status.Settled() {
		return op
	}
	done, ok := s.cfg.WaitSlots.Take(tenantID)
	if !ok {
		log.LogAttrs(ctx, slog.LevelDebug, "mcp wait not started: the tenant holds the most waits allowed", slog.Int("max_waits", s.cfg.WaitSlots.Max()))
		return op
	}
	defer done()
	waited, err := opwait.Until(ctx, s.cfg.Notifications, nil, tenantID, key, s.cfg.Wait,
		func(ctx context.Context) (*outbox.Op, error) { return s.ob.Get(ctx, tenantID, key) },
		func(op *outbox.Op) bool { return op.Status.Settled() })
	if err != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "mcp wait for op failed", slog.Any("error", err))
		return op
	}
	return waited
}

// callResult is the result the model reads of a call recorded as res, op as it stands.
func (s *Server) callResult(tool string, args json.RawMessage, id callIdentity, res *outbox.EnqueueResult, op *outbox.Op) *mcp.CallToolResult {
	if res.Matched != nil {
		text := describeMatch(op, res.Matched, s.identity(tool, args), id)
		view := newOpView(op, true, res.Matched, s.identity(tool, args))
		view.Message = text
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: text}},
			StructuredContent: view,
			IsError:           op.Status == protocol.StatusFailed,
		}
	}
	if r := s.passthrough(tool, op, res.Replayed); r != nil {
		return r
	}
	text := describe(op, res.Replayed, id, s.cfg.Wait.String())
	view := newOpView(op, res.Replayed, nil, nil)
	if op.Status == protocol.StatusAwaitingApproval && res.Why != "" {
		text += " Why: " + res.Why
		view.Op.Why = res.Why
	}
	if link := s.approvalLink(op); link != "" {
		text += " A person who approves for this account can approve or reject it at " + link +
			" (give the user this link); once they have, calling the tool again with the same arguments returns the outcome without repeating it."
		view.ApprovalURL = link
	}
	view.Message = text
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: view,
		IsError:           op.Status == protocol.StatusFailed,
	}
}

// failure turns an error of recording a call into the result the model reads.
// When Postgres cannot be reached, the answer is a JSON-RPC error instead.
func (s *Server) failure(ctx context.Context, log *slog.Logger, err error) (*mcp.CallToolResult, error) {
	if r := refusal(err); r != nil {
		log.LogAttrs(ctx, slog.LevelDebug, "mcp tool call refused", slog.Any("error", err))
		return r, nil
	}
	if pgavail.Unavailable(err) {
		return nil, s.storeUnavailable(ctx, log, err)
	}
	log.LogAttrs(ctx, slog.LevelError, "mcp tool call failed", slog.Any("error", err))
	return errorResult("oncebox could not record this call because of an internal error. " +
		"Nothing was executed. It is safe to call the tool again with the same arguments."), nil
}

// refusal turns an error of Enqueue that the model can act on into a tool error
// result, or returns nil for any other error.
func refusal(err error) *mcp.CallToolResult {
	var (
		ve *vendorapi.ValidationError
		ke *outbox.KeyConflictError
	)
	var (
		be          *governance.BudgetExceededError
		notOwned    *outbox.NotOwnedError
		unavailable *outbox.ObjectUnavailableError
	)
	switch {
	case errors.As(err, &notOwned):
		return errorResult(fmt.Sprintf("Not done: %s (argument %q): this tenant did not make it through oncebox and has not adopted it. "+
			"Nothing was executed or recorded. Do not retry it with this id; tell the user.", notOwned.Error(), notOwned.Arg))
	case errors.As(err, &unavailable):
		return errorResult(fmt.Sprintf("Not done: the vendor could not be asked whether %s %s is one of this tenant's objects. "+
			"Nothing was executed or recorded. It is safe to call the tool again with the same arguments in a few seconds.", unavailable.Arg, unavailable.ID))
	case errors.As(err, &be):
		return errorResult(fmt.Sprintf("Not done: %s Nothing was executed or recorded. Do not retry it before %s from now; tell the user.",
			be.Sentence, be.RetryAfter))
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
	case errors.Is(err, outbox.ErrUnknownTenant):
		return errorResult("Not done: this server's tenant no longer exists. Nothing was executed or recorded. Do not retry; tell the user.")
	}
	return nil
}

// errorResult is a tool error result with one text.
func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}

// approvalLink returns the console page where a person decides op, when op waits for
// approval and the console's URL is known; else "".
func (s *Server) approvalLink(op *outbox.Op) string {
	if op.Status != protocol.StatusAwaitingApproval || s.cfg.ConsoleURL == "" {
		return ""
	}
	return strings.TrimSuffix(s.cfg.ConsoleURL, "/") + "/approvals?op=" + url.QueryEscape(op.ID)
}
