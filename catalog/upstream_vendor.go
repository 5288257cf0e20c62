package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/outbox"
)

// Metadata keys oncebox sends in an upstream tools/call's _meta.
const (
	// MetaOpID carries the op's id.
	MetaOpID = "oncebox/op_id"
	// MetaIdempotencyKey carries the op's key, stable across resends of one op.
	MetaIdempotencyKey = "oncebox/idempotency_key"
)

// connectUpstreams opens every upstream, lists its tools and adds them to the
// catalog.
func (r *Runtime) connectUpstreams(ctx context.Context, opts Options) error {
	r.upstreams, r.kept, r.parked = map[string]*upstreamConn{}, map[string]bool{}, map[string]*upstreamConn{}
	if prev := opts.Previous; prev != nil {
		for name, c := range prev.parked {
			r.parked[name] = c
		}
		for name, c := range prev.upstreams {
			r.parked[name] = c
		}
	}
	for _, name := range r.cat.UpstreamNames() {
		up := r.cat.Upstreams[name]
		conn, ok := r.parked[name]
		if ok && reflect.DeepEqual(*conn.up, *up) {
			r.kept[name] = true
		} else {
			conn = newUpstreamConn(up, opts)
		}
		delete(r.parked, name)
		r.upstreams[name] = conn
		listed, err := conn.list(ctx)
		if err != nil {
			r.Close()
			return &Error{File: r.cat.File, Kind: "upstream", Name: name, Message: "cannot list its tools: " + err.Error()}
		}
		if err := r.cat.addUpstreamTools(up, listed); err != nil {
			r.Close()
			return err
		}
	}
	return nil
}

// Close closes the upstreams' sessions (and ends stdio upstreams' processes) that r
// opened itself: those kept from Options.Previous belong to the runtime in force.
func (r *Runtime) Close() {
	for name, c := range r.upstreams {
		if !r.kept[name] {
			c.close()
		}
	}
}

// closeAll closes every upstream session r holds, kept and parked ones included.
func (r *Runtime) closeAll() {
	for _, c := range r.upstreams {
		c.close()
	}
	for _, c := range r.parked {
		c.close()
	}
}

// retire ends the sessions of cur that next does not hold: an upstream that changed
// is closed for good, one the file no longer names is parked (its process ended,
// opened again only to send an op accepted before).
func retire(cur, next *Runtime) {
	holds := func(c *upstreamConn) bool {
		for _, n := range next.upstreams {
			if n == c {
				return true
			}
		}
		return false
	}
	for _, m := range []map[string]*upstreamConn{cur.upstreams, cur.parked} {
		for name, c := range m {
			switch {
			case holds(c):
			case next.parked[name] == c:
				c.rest()
			default:
				c.close()
			}
		}
	}
}

// readUpstream forwards a read tool's call and returns the upstream's
// CallToolResult as JSON.
func (r *Runtime) readUpstream(ctx context.Context, t *Tool, args json.RawMessage) (json.RawMessage, error) {
	m, err := upstreamArgs(t, args, "")
	if err != nil {
		return nil, &outbox.ValidationError{Field: "args", Message: err.Error()}
	}
	res, err := r.upstreams[t.Upstream].call(ctx, "read", &mcp.CallToolParams{Name: t.UpstreamTool, Arguments: m})
	if err != nil {
		return nil, &ReadError{Code: "upstream_error", Message: err.Error()}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, &ReadError{Code: "upstream_error", Message: err.Error()}
	}
	return b, nil
}

// upstreamVendor dispatches the ops of one upstream's write and unsafe tools with
// tools/call.
type upstreamVendor struct {
	name string
	// current returns the runtime in force: its catalog defines the upstream's tools
	// and its session calls them.
	current func() *Runtime
	// conn is the upstream's session when the vendor was made, used once a reload has
	// dropped the upstream from the file.
	conn *upstreamConn
	lag  time.Duration
}

// session is the upstream's session in force.
func (v *upstreamVendor) session() *upstreamConn {
	r := v.current()
	if c, ok := r.upstreams[v.name]; ok {
		return c
	}
	if c, ok := r.parked[v.name]; ok {
		return c
	}
	return v.conn
}

var _ outbox.Vendor = (*upstreamVendor)(nil)

// Name returns "catalog_<upstream>".
func (v *upstreamVendor) Name() string { return VendorPrefix + v.name }

// Idempotency is the upstream's native_keys and native_window.
func (v *upstreamVendor) Idempotency() outbox.Idempotency {
	up := v.conn.up
	return outbox.Idempotency{Native: up.NativeKeys, Window: up.NativeWindow}
}

// Throttle takes a slot of the upstream's rate limit (shared by every call of this
// process) for the op about to be claimed, or says how long to wait for one: the
// worker then snoozes the job without claiming the op, sending or counting an attempt
// (outbox.Throttler).
func (v *upstreamVendor) Throttle() time.Duration { return v.session().throttle() }

// Queue is the upstream's workers and job timeout (zero fields: the server's defaults
// for catalog targets).
func (v *upstreamVendor) Queue() outbox.QueueConfig {
	return outbox.QueueConfig{MaxWorkers: v.conn.up.Workers, JobTimeout: v.conn.up.JobTimeout}
}

// LookupLag is the catalog's lookup lag.
func (v *upstreamVendor) LookupLag() time.Duration { return v.lag }

// Dispatch calls the upstream tool, as it was defined when the op was accepted
// (p.Definition: its name upstream and tag argument; an op stored without one is sent
// as the catalog in force defines its tool), with the op's id and key in _meta (and
// the op id in the tag argument). A result is success, isError or a JSON-RPC refusal (invalid
// params, unknown tool) a permanent failure stored as the op's result, a call that
// could not be sent retryable, and a lost answer unknown.
func (v *upstreamVendor) Dispatch(ctx context.Context, p outbox.DispatchParams) (*outbox.DispatchResult, error) {
	t := v.current().cat.Tools[p.Tool]
	var head struct {
		Upstream string `json:"upstream"`
	}
	// A definition without "upstream" was stored before upstream tools kept theirs:
	// such an op is sent as the catalog in force defines its tool.
	if len(p.Definition) > 0 && json.Unmarshal(p.Definition, &head) == nil && head.Upstream != "" {
		var err error
		if t, err = parseDefinition(p.Tool, p.Definition); err != nil {
			return nil, &outbox.DispatchError{Outcome: outbox.OutcomePermanent, Code: "invalid_definition", Message: err.Error(), Err: err}
		}
	}
	if t == nil || t.Upstream != v.name {
		return nil, &outbox.DispatchError{Outcome: outbox.OutcomePermanent, Code: "unknown_tool",
			Message: fmt.Sprintf("tool %q is no longer offered by upstream %q", p.Tool, v.name)}
	}
	args, err := upstreamArgs(t, p.Args, p.OpID)
	if err != nil {
		return nil, &outbox.DispatchError{Outcome: outbox.OutcomePermanent, Code: "invalid_args", Message: err.Error(), Err: err}
	}
	meta := mcp.Meta{MetaOpID: p.OpID, MetaIdempotencyKey: p.VendorKey}
	// The dispatch's trace context (traceparent, tracestate), when oncebox traces.
	carrier := propagation.MapCarrier{}
	tracing.Propagator().Inject(ctx, carrier)
	for k, val := range carrier {
		meta[k] = val
	}
	res, raw, err := v.session().callRaw(ctx, "dispatch", &mcp.CallToolParams{Meta: meta, Name: t.UpstreamTool, Arguments: args})
	if err != nil {
		we, answered := upstreamError(err)
		var refused *AnswerRefusedError
		switch {
		case errors.As(err, &refused) && refused.Reason == answerTooLarge:
			body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": "result_too_large", "max_result_bytes": refused.Limit}})
			return nil, &outbox.DispatchError{Outcome: outbox.OutcomePermanent, Code: "result_too_large", Body: body, Err: err,
				Message: fmt.Sprintf("upstream %s answered with more than its max_result_bytes (%d bytes): the result was not kept; the tool may have acted", v.name, refused.Limit)}
		case errors.As(err, &refused):
			return nil, &outbox.DispatchError{Outcome: outbox.OutcomeUnknown, Code: "malformed_answer", Unanswered: true, Err: err,
				Message: fmt.Sprintf("upstream %s answered this call with something that is no JSON-RPC message: it may have acted", v.name)}
		case errors.Is(err, errNotSent):
			return nil, &outbox.DispatchError{Outcome: outbox.OutcomeRetryable, Code: "not_sent",
				Message: fmt.Sprintf("upstream %s could not be reached; nothing was sent", v.name), Err: err}
		case answered && (we.Code == jsonrpc.CodeInvalidParams || we.Code == jsonrpc.CodeMethodNotFound):
			body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": we.Code, "message": we.Message}})
			return nil, &outbox.DispatchError{Outcome: outbox.OutcomePermanent, Code: "upstream_refused",
				Message: fmt.Sprintf("upstream %s refused the call before running it: %s", v.name, we.Message), Body: body, Err: err}
		case answered:
			return nil, &outbox.DispatchError{Outcome: outbox.OutcomeUnknown, Code: "upstream_error",
				Message: fmt.Sprintf("upstream %s answered with error %d (%s): it may have acted", v.name, we.Code, we.Message), Err: err}
		default:
			return nil, &outbox.DispatchError{Outcome: outbox.OutcomeUnknown, Code: "no_answer", Unanswered: true,
				Message: fmt.Sprintf("the call to upstream %s was sent but its answer was lost: it may have acted", v.name), Err: err}
		}
	}
	// The CallToolResult as it came (byte for byte); the SDK's decoding of it encoded
	// again only when it was not caught.
	body := raw
	if body == nil {
		if body, err = json.Marshal(res); err != nil {
			return nil, &outbox.DispatchError{Outcome: outbox.OutcomeUnknown, Code: "bad_answer", Message: err.Error(), Err: err}
		}
	}
	if res.IsError {
		return nil, &outbox.DispatchError{Outcome: outbox.OutcomePermanent, Code: "tool_error",
			Message: fmt.Sprintf("upstream tool %s answered isError", t.UpstreamTool), Body: body}
	}
	return &outbox.DispatchResult{Result: body, VendorRef: objectRef(res)}, nil
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

// Lookup calls the tool's lookup tool with the op id and counts the objects it
// answers: a JSON array, or an object with an "objects" array, in its structured
// content or its first text content. Without a lookup tool, or when the answer
// cannot be read, the upstream cannot be asked (outbox.ErrLookupUnavailable). An
// answer that was no JSON-RPC message at all (truncated, garbage) fails this lookup
// alone, as a lost answer does: the op is looked up again later.
func (v *upstreamVendor) Lookup(ctx context.Context, p outbox.LookupParams) (*outbox.LookupResult, error) {
	t, ok := v.current().cat.Tools[p.Tool]
	if !ok || t.Upstream != v.name {
		return nil, fmt.Errorf("tool %q is not offered by upstream %s: %w", p.Tool, v.name, outbox.ErrLookupUnavailable)
	}
	if t.LookupTool == "" {
		return nil, fmt.Errorf("upstream tool %s has no lookup_tool in the catalog, so its objects cannot be looked up: %w",
			t.UpstreamTool, outbox.ErrLookupUnavailable)
	}
	res, err := v.session().call(ctx, "lookup", &mcp.CallToolParams{Name: t.LookupTool, Arguments: map[string]any{t.LookupArgument: p.OpID}})
	if err != nil {
		if we, answered := upstreamError(err); answered && !refusedAsMalformed(we) {
			return nil, fmt.Errorf("lookup tool %s of upstream %s: %w: %w", t.LookupTool, v.name, outbox.ErrLookupUnavailable, err)
		}
		return nil, fmt.Errorf("lookup tool %s of upstream %s: %w", t.LookupTool, v.name, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("lookup tool %s of upstream %s answered isError: %w", t.LookupTool, v.name, outbox.ErrLookupUnavailable)
	}
	objs, err := lookupObjects(res)
	if err != nil {
		return nil, fmt.Errorf("lookup tool %s of upstream %s: %w: %w", t.LookupTool, v.name, outbox.ErrLookupUnavailable, err)
	}
	out := &outbox.LookupResult{}
	for _, o := range objs {
		out.Objects = append(out.Objects, outbox.VendorObject{ID: idOf(o), OpID: p.OpID, Summary: objectResult(o)})
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

// Health reports each upstream's session, by upstream name.
func (r *Runtime) Health() map[string]UpstreamHealth {
	out := make(map[string]UpstreamHealth, len(r.upstreams))
	for name, c := range r.upstreams {
		out[name] = c.health()
	}
	return out
}

// Relist lists an upstream's tools again (it announced
// notifications/tools/list_changed) and returns a runtime like r whose catalog offers
// them in place of the ones listed before, checked as at start. It shares r's
// targets and sessions; r is unchanged. Make it the catalog in force with Live.Swap.
func (r *Runtime) Relist(ctx context.Context, upstream string) (*Runtime, error) {
	conn, ok := r.upstreams[upstream]
	if !ok {
		return nil, &Error{File: r.cat.File, Kind: "upstream", Name: upstream, Message: "is not in the catalog in force"}
	}
	listed, err := conn.list(ctx)
	if err != nil {
		return nil, &Error{File: r.cat.File, Kind: "upstream", Name: upstream, Message: "cannot list its tools: " + err.Error()}
	}
	cat := &Catalog{File: r.cat.File, Targets: r.cat.Targets, Upstreams: r.cat.Upstreams, Tools: map[string]*Tool{}}
	for name, t := range r.cat.Tools {
		if t.Upstream != upstream {
			cat.Tools[name] = t
		}
	}
	if err := cat.addUpstreamTools(conn.up, listed); err != nil {
		return nil, err
	}
	next := *r
	next.cat = cat
	return &next, nil
}
