package mcpupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/vendorapi"
)

// Metadata keys oncebox sends in an upstream tools/call's _meta.
const (
	// MetaOpID carries the op's id.
	MetaOpID = "oncebox/op_id"
	// MetaIdempotencyKey carries the op's key, stable across resends of one op.
	MetaIdempotencyKey = "oncebox/idempotency_key"
)

// Read calls a read tool at once, waiting for the rate limit, and returns its
// result. A result the upstream marked isError is a result, not an error.
func (u *Session) Read(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	return u.call(ctx, "read", &mcp.CallToolParams{Name: tool, Arguments: args})
}

// DispatchParams is one op's tools/call.
type DispatchParams struct {
	// OpID is the op's id, sent in _meta (MetaOpID).
	OpID string
	// Key is the op's vendor key, sent in _meta (MetaIdempotencyKey).
	Key string
	// Tool is the tool's name upstream.
	Tool string
	// Args are the call's arguments, the op id already in a tag argument if the
	// tool has one.
	Args map[string]any
}

// Dispatch calls the tool for an op, with the op's id and key (and the dispatch's
// trace context, when oncebox traces) in _meta, and classifies the answer: a result
// is success, its bytes as they came on the wire; isError or a JSON-RPC refusal
// (invalid params, unknown tool) a permanent failure stored as the op's result; a
// call that could not be sent retryable; a lost answer, another JSON-RPC error or an
// answer that is no JSON-RPC message unknown; an answer larger than MaxResultBytes a
// permanent failure that says the tool may have acted. It takes no rate-limit slot:
// the caller took one with Throttle before claiming the op.
func (u *Session) Dispatch(ctx context.Context, p DispatchParams) (*vendorapi.DispatchResult, error) {
	meta := mcp.Meta{MetaOpID: p.OpID, MetaIdempotencyKey: p.Key}
	carrier := propagation.MapCarrier{}
	tracing.Propagator().Inject(ctx, carrier)
	for k, val := range carrier {
		meta[k] = val
	}
	res, raw, err := u.callRaw(ctx, "dispatch", &mcp.CallToolParams{Meta: meta, Name: p.Tool, Arguments: p.Args})
	if err != nil {
		return nil, dispatchError(u.up.Name, err)
	}
	// The CallToolResult as it came (byte for byte); the SDK's decoding of it encoded
	// again only when it was not caught.
	body := raw
	if body == nil {
		if body, err = json.Marshal(res); err != nil {
			return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomeUnknown, Code: "bad_answer", Message: err.Error(), Err: err}
		}
	}
	if res.IsError {
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "tool_error",
			Message: fmt.Sprintf("upstream tool %s answered isError", p.Tool), Body: body}
	}
	return &vendorapi.DispatchResult{Result: body, VendorRef: objectRef(res)}, nil
}

// dispatchError classifies a failed dispatch of upstream name into one of the
// outbox's outcome classes (Dispatch).
func dispatchError(name string, err error) *vendorapi.DispatchError {
	we, answered := upstreamError(err)
	var refused *answerRefusedError
	switch {
	case errors.As(err, &refused) && refused.Reason == answerTooLarge:
		body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": "result_too_large", "max_result_bytes": refused.Limit}})
		return &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "result_too_large", Body: body, Err: err,
			Message: fmt.Sprintf("upstream %s answered with more than its max_result_bytes (%d bytes): the result was not kept; the tool may have acted", name, refused.Limit)}
	case errors.As(err, &refused):
		return &vendorapi.DispatchError{Outcome: vendorapi.OutcomeUnknown, Code: "malformed_answer", Unanswered: true, Err: err,
			Message: fmt.Sprintf("upstream %s answered this call with something that is no JSON-RPC message: it may have acted", name)}
	case errors.Is(err, errNotSent):
		return &vendorapi.DispatchError{Outcome: vendorapi.OutcomeRetryable, Code: "not_sent",
			Message: fmt.Sprintf("upstream %s could not be reached; nothing was sent", name), Err: err}
	case answered && (we.Code == jsonrpc.CodeInvalidParams || we.Code == jsonrpc.CodeMethodNotFound):
		body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": we.Code, "message": we.Message}})
		return &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "upstream_refused",
			Message: fmt.Sprintf("upstream %s refused the call before running it: %s", name, we.Message), Body: body, Err: err}
	case answered:
		return &vendorapi.DispatchError{Outcome: vendorapi.OutcomeUnknown, Code: "upstream_error",
			Message: fmt.Sprintf("upstream %s answered with error %d (%s): it may have acted", name, we.Code, we.Message), Err: err}
	default:
		return &vendorapi.DispatchError{Outcome: vendorapi.OutcomeUnknown, Code: "no_answer", Unanswered: true,
			Message: fmt.Sprintf("the call to upstream %s was sent but its answer was lost: it may have acted", name), Err: err}
	}
}

// objectRef is the id of the object an upstream's result names: the "id" of its
// structured content, else of its first text content read as a JSON object; "" when
// it names none.
func objectRef(res *mcp.CallToolResult) string {
	var raw json.RawMessage
	if res.StructuredContent != nil {
		raw, _ = json.Marshal(res.StructuredContent)
	} else {
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				raw = json.RawMessage(tc.Text)
				break
			}
		}
	}
	return idOf(raw)
}

// idOf is the "id" member of a JSON object, a string or a number, or "".
func idOf(raw json.RawMessage) string {
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &head) != nil || len(head.ID) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(head.ID, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(head.ID, &n) == nil {
		return n.String()
	}
	return ""
}

// Lookup calls the lookup tool tool with the op id in its argument arg and reads the
// objects it answers: a JSON array, or an object with an "objects" array, in its
// structured content or its first text content. When the answer is isError, a
// JSON-RPC error, or cannot be read, the upstream cannot be asked
// (vendorapi.ErrLookupUnavailable). An answer that was no JSON-RPC message at all
// (truncated, garbage) fails this lookup alone, as a lost answer does: the op is
// looked up again later.
func (u *Session) Lookup(ctx context.Context, tool, arg, opID string) (*vendorapi.LookupResult, error) {
	res, err := u.call(ctx, "lookup", &mcp.CallToolParams{Name: tool, Arguments: map[string]any{arg: opID}})
	if err != nil {
		if we, answered := upstreamError(err); answered && !refusedAsMalformed(we) {
			return nil, fmt.Errorf("lookup tool %s of upstream %s: %w: %w", tool, u.up.Name, vendorapi.ErrLookupUnavailable, err)
		}
		return nil, fmt.Errorf("lookup tool %s of upstream %s: %w", tool, u.up.Name, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("lookup tool %s of upstream %s answered isError: %w", tool, u.up.Name, vendorapi.ErrLookupUnavailable)
	}
	objs, err := lookupObjects(res)
	if err != nil {
		return nil, fmt.Errorf("lookup tool %s of upstream %s: %w: %w", tool, u.up.Name, vendorapi.ErrLookupUnavailable, err)
	}
	out := &vendorapi.LookupResult{}
	for _, o := range objs {
		out.Objects = append(out.Objects, vendorapi.VendorObject{ID: idOf(o), OpID: opID, Summary: objectResult(o)})
	}
	return out, nil
}

// objectResult is the result an op settled from a lookup keeps: a CallToolResult, as
// a dispatched op's is, whose structured content is the object found (when it is a
// JSON object) and whose text content is its JSON, so that a replay of the op reads
// the same shape however it was settled.
func objectResult(o json.RawMessage) json.RawMessage {
	res := struct {
		Content           []map[string]string `json:"content"`
		StructuredContent json.RawMessage     `json:"structuredContent,omitempty"`
	}{Content: []map[string]string{{"type": "text", "text": string(o)}}}
	if t := bytes.TrimSpace(o); len(t) > 0 && t[0] == '{' {
		res.StructuredContent = o
	}
	b, err := json.Marshal(res)
	if err != nil {
		return o
	}
	return b
}

// lookupObjects reads a lookup tool's answer.
func lookupObjects(res *mcp.CallToolResult) ([]json.RawMessage, error) {
	var raw json.RawMessage
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, err
		}
		raw = b
	} else {
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				raw = json.RawMessage(tc.Text)
				break
			}
		}
	}
	if raw == nil {
		return nil, errors.New("the answer has no structured or text content")
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(raw, &arr); err == nil {
		return arr, nil
	}
	var obj struct {
		Objects *[]json.RawMessage `json:"objects"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Objects == nil {
		return nil, errors.New(`the answer is neither a JSON array nor an object with an "objects" array`)
	}
	return *obj.Objects, nil
}
