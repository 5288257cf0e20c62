package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"sync"
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

// upstreamConn is one upstream's client session, opened again after it breaks.
type upstreamConn struct {
	up      *Upstream
	client  *mcp.Client
	timeout time.Duration
	http    *http.Client
	logger  *slog.Logger

	mu      sync.Mutex
	session *mcp.ClientSession
}

// headerTransport adds an upstream's headers to every request.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

func (u *upstreamConn) transport() mcp.Transport {
	if u.up.URL != "" {
		base := http.DefaultTransport
		if u.http != nil && u.http.Transport != nil {
			base = u.http.Transport
		}
		return &mcp.StreamableClientTransport{Endpoint: u.up.URL, HTTPClient: &http.Client{Transport: &headerTransport{headers: u.up.Headers, base: base}},
			DisableStandaloneSSE: true}
	}
	cmd := exec.Command(u.up.Command, u.up.Args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for _, k := range sortedKeys(u.up.Env) {
		cmd.Env = append(cmd.Env, k+"="+u.up.Env[k])
	}
	cmd.Stderr = &logWriter{logger: u.logger, upstream: u.up.Name}
	return &mcp.CommandTransport{Command: cmd}
}

// logWriter sends a stdio upstream's stderr to the log.
type logWriter struct {
	logger   *slog.Logger
	upstream string
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.logger.Info("upstream stderr", slog.String("upstream", w.upstream), slog.String("text", string(p)))
	return len(p), nil
}

// get returns the open session, connecting when there is none.
func (u *upstreamConn) get(ctx context.Context) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session != nil {
		return u.session, nil
	}
	cctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	s, err := u.client.Connect(cctx, u.transport(), nil)
	if err != nil {
		return nil, fmt.Errorf("connect to upstream %s: %w", u.up.Name, err)
	}
	u.session = s
	return s, nil
}

// drop closes s if it is still the open session, so the next call reconnects.
func (u *upstreamConn) drop(s *mcp.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session == s {
		u.session = nil
		_ = s.Close()
	}
}

func (u *upstreamConn) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session != nil {
		_ = u.session.Close()
		u.session = nil
	}
}

// errNotSent is a call that never reached the upstream (no session could be opened).
var errNotSent = errors.New("not sent")

// call calls a tool. An error is errNotSent (wrapped) when the request was never
// written, one upstreamError finds when the upstream answered with a JSON-RPC error, or
// else the call's answer was lost (a timeout, a broken connection, a dead process, an
// HTTP answer that is no JSON-RPC answer) and the session is dropped.
func (u *upstreamConn) call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	s, err := u.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotSent, err)
	}
	cctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	res, err := s.CallTool(cctx, p)
	if err != nil {
		if _, answered := upstreamError(err); !answered {
			u.drop(s)
		}
		return nil, err
	}
	return res, nil
}

// codeRejectedByTransport is the code of the error the SDK's client makes of its own
// transport failures (its internal jsonrpc2.ErrRejected, "rejected by transport"): an
// HTTP request that failed, even after it was written (a connection closed before the
// answer), an answer it could not read, a 429 or 5xx status without a JSON-RPC error.
const codeRejectedByTransport = -32005

// upstreamError returns the JSON-RPC error the upstream answered a call with. A
// transport failure the SDK reports as a JSON-RPC error (codeRejectedByTransport) is no
// answer: the request may have reached the upstream, and nothing came back.
func upstreamError(err error) (*jsonrpc.Error, bool) {
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code == codeRejectedByTransport {
		return nil, false
	}
	return we, true
}

// list lists the upstream's tools.
func (u *upstreamConn) list(ctx context.Context) ([]*mcp.Tool, error) {
	s, err := u.get(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	var out []*mcp.Tool
	for t, err := range s.Tools(cctx, nil) {
		if err != nil {
			u.drop(s)
			return nil, fmt.Errorf("list the tools of upstream %s: %w", u.up.Name, err)
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// connectUpstreams opens every upstream, lists its tools and adds them to the
// catalog.
func (r *Runtime) connectUpstreams(ctx context.Context, opts Options) error {
	r.upstreams = map[string]*upstreamConn{}
	for _, name := range r.cat.UpstreamNames() {
		up := r.cat.Upstreams[name]
		conn := &upstreamConn{up: up, timeout: opts.Timeout, http: opts.HTTPClient, logger: opts.Logger,
			client: mcp.NewClient(&mcp.Implementation{Name: "oncebox", Version: "1"}, nil)}
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

// Close closes the upstreams' sessions (and ends stdio upstreams' processes).
func (r *Runtime) Close() {
	for _, c := range r.upstreams {
		c.close()
	}
}

// readUpstream forwards a read tool's call and returns the upstream's
// CallToolResult as JSON.
func (r *Runtime) readUpstream(ctx context.Context, t *Tool, args json.RawMessage) (json.RawMessage, error) {
	m, err := upstreamArgs(t, args, "")
	if err != nil {
		return nil, &outbox.ValidationError{Field: "args", Message: err.Error()}
	}
	res, err := r.upstreams[t.Upstream].call(ctx, &mcp.CallToolParams{Name: t.UpstreamTool, Arguments: m})
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
	if c, ok := v.current().upstreams[v.name]; ok {
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

// LookupLag is the catalog's lookup lag.
func (v *upstreamVendor) LookupLag() time.Duration { return v.lag }

// Dispatch calls the upstream tool with the op's id and key in _meta (and the op id
// in the tag argument). A result is success, isError or a JSON-RPC refusal (invalid
// params, unknown tool) a permanent failure stored as the op's result, a call that
// could not be sent retryable, and a lost answer unknown.
func (v *upstreamVendor) Dispatch(ctx context.Context, p outbox.DispatchParams) (*outbox.DispatchResult, error) {
	t, ok := v.current().cat.Tools[p.Tool]
	if !ok || t.Upstream != v.name {
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
	res, err := v.session().call(ctx, &mcp.CallToolParams{Meta: meta, Name: t.UpstreamTool, Arguments: args})
	if err != nil {
		we, answered := upstreamError(err)
		switch {
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
	body, err := json.Marshal(res)
	if err != nil {
		return nil, &outbox.DispatchError{Outcome: outbox.OutcomeUnknown, Code: "bad_answer", Message: err.Error(), Err: err}
	}
	if res.IsError {
		return nil, &outbox.DispatchError{Outcome: outbox.OutcomePermanent, Code: "tool_error",
			Message: fmt.Sprintf("upstream tool %s answered isError", t.UpstreamTool), Body: body}
	}
	return &outbox.DispatchResult{Result: body}, nil
}

// Lookup calls the tool's lookup tool with the op id and counts the objects it
// answers: a JSON array, or an object with an "objects" array, in its structured
// content or its first text content. Without a lookup tool, or when the answer
// cannot be read, the upstream cannot be asked (outbox.ErrLookupUnavailable).
func (v *upstreamVendor) Lookup(ctx context.Context, p outbox.LookupParams) (*outbox.LookupResult, error) {
	t, ok := v.current().cat.Tools[p.Tool]
	if !ok || t.Upstream != v.name {
		return nil, fmt.Errorf("tool %q is not offered by upstream %s: %w", p.Tool, v.name, outbox.ErrLookupUnavailable)
	}
	if t.LookupTool == "" {
		return nil, fmt.Errorf("upstream tool %s has no lookup_tool in the catalog, so its objects cannot be looked up: %w",
			t.UpstreamTool, outbox.ErrLookupUnavailable)
	}
	res, err := v.session().call(ctx, &mcp.CallToolParams{Name: t.LookupTool, Arguments: map[string]any{t.LookupArgument: p.OpID}})
	if err != nil {
		if _, answered := upstreamError(err); answered {
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
		var head struct {
			ID any `json:"id"`
		}
		_ = json.Unmarshal(o, &head)
		id := ""
		if head.ID != nil {
			id = fmt.Sprint(head.ID)
		}
		out.Objects = append(out.Objects, outbox.VendorObject{ID: id, OpID: p.OpID, Summary: o})
	}
	return out, nil
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
