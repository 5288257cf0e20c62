package mcpupstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An op's stored result is the upstream's CallToolResult byte for byte, as it came on
// the wire, not the SDK's decoding of it encoded again (which would reorder the keys of
// structuredContent and drop the fields the SDK does not know). The SDK hands out only
// decoded results, so the raw result of each dispatch's tools/call is caught under the
// SDK: in the HTTP round trip for a streamable HTTP upstream, in the connection's Read
// for a stdio one. A dispatch's request is recognized by its _meta "oncebox/op_id",
// then its answer by the JSON-RPC id the request went out with.

// rawTap catches the raw results of the dispatches in progress on one upstream.
type rawTap struct {
	mu sync.Mutex
	// byOp holds the dispatches in progress by op id; byID those whose request went
	// out, by JSON-RPC id.
	byOp map[string]*rawSlot
	byID map[string]*rawSlot
}

// rawSlot receives one dispatch's raw result.
type rawSlot struct {
	id  string
	raw json.RawMessage
	// spoiled is why oncebox put an error in place of the answer: answerTooLarge or
	// answerMalformed; "" when it did not.
	spoiled string
}

// Why oncebox answered a call itself in place of the upstream's answer.
const (
	// answerTooLarge: the answer was larger than the upstream's max_result_bytes.
	answerTooLarge = "too_large"
	// answerMalformed: the answer was no JSON-RPC message (truncated JSON, garbage).
	answerMalformed = "malformed"
)

// codeAnswerRefused is the JSON-RPC error code of the answer oncebox puts in place of
// one it would not read (too large, malformed): the call it belongs to fails, and the
// session, with every other call on it, goes on.
const codeAnswerRefused = -32603

func newRawTap() *rawTap {
	return &rawTap{byOp: map[string]*rawSlot{}, byID: map[string]*rawSlot{}}
}

// expect starts catching the result of the dispatch of opID; done returns it (nil when
// it was not caught) and why oncebox answered in the upstream's place, if it did, and
// stops.
func (t *rawTap) expect(opID string) (done func() (json.RawMessage, string)) {
	slot := &rawSlot{}
	t.mu.Lock()
	t.byOp[opID] = slot
	t.mu.Unlock()
	return func() (json.RawMessage, string) {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.byOp, opID)
		if slot.id != "" {
			delete(t.byID, slot.id)
		}
		return slot.raw, slot.spoiled
	}
}

// spoil notes that oncebox answered the call id itself, for why.
func (t *rawTap) spoil(id any, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if slot := t.byID[idKey(id)]; slot != nil {
		slot.spoiled = why
	}
}

// malformedMessage is the message of the error oncebox answers a call with in place of
// an upstream answer that is no JSON-RPC message.
const malformedMessage = "oncebox: the upstream's answer is not a JSON-RPC message (malformed or truncated); only this call fails"

// refusedAsMalformed reports whether we is the error oncebox put in place of an
// upstream answer that was no JSON-RPC message: garbage this once, not the upstream's
// word.
func refusedAsMalformed(we *jsonrpc.Error) bool {
	return we.Code == codeAnswerRefused && we.Message == malformedMessage
}

// refusal is the JSON-RPC answer oncebox puts in place of the upstream's answer to the
// call id: an error saying why.
func refusal(id any, why string, limit int64) []byte {
	msg := malformedMessage
	if why == answerTooLarge {
		msg = fmt.Sprintf("oncebox: the upstream's answer is larger than max_result_bytes (%d bytes); it was not read", limit)
	}
	idb, _ := json.Marshal(id)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(idb), "error": map[string]any{"code": codeAnswerRefused, "message": msg}})
	return b
}

func idKey(v any) string { return fmt.Sprint(v) }

// sent notes a request on its way: a dispatch's tools/call is tied to its id. It
// reports whether one was.
func (t *rawTap) sent(id any, method string, params json.RawMessage) bool {
	if method != "tools/call" || id == nil {
		return false
	}
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	opID, _ := p.Meta[MetaOpID].(string)
	t.mu.Lock()
	defer t.mu.Unlock()
	slot := t.byOp[opID]
	if slot == nil {
		return false
	}
	slot.id = idKey(id)
	t.byID[slot.id] = slot
	return true
}

// answered notes an answer: the result of a dispatch's tools/call is kept.
func (t *rawTap) answered(id any, result json.RawMessage) {
	if id == nil || len(result) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if slot := t.byID[idKey(id)]; slot != nil {
		slot.raw = bytes.Clone(result)
	}
}

// wireMessage is a JSON-RPC message as it is on the wire.
type wireMessage struct {
	ID     any             `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
}

// wireMessages reads one JSON-RPC message or a batch of them.
func wireMessages(b []byte) []wireMessage {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var batch []wireMessage
		if dec.Decode(&batch) != nil {
			return nil
		}
		return batch
	}
	var m wireMessage
	if dec.Decode(&m) != nil {
		return nil
	}
	return []wireMessage{m}
}

// tapTransport catches the raw results of a streamable HTTP upstream's dispatches.
type tapTransport struct {
	tap  *rawTap
	base http.RoundTripper
	// limit is the upstream's max_result_bytes.
	limit int64
}

func (t *tapTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.Body == nil {
		resp, err := t.base.RoundTrip(r)
		if err != nil {
			return resp, err
		}
		return t.guard(resp, nil), nil // the standalone stream, a DELETE
	}
	// A request that failed before any connection was had (a refused connection, a
	// dial or DNS error) provably never left: its error wraps errNotSent. Once a
	// connection was had, even a failure to write may hide a request the upstream
	// read, so that stays a lost answer.
	var gotConn atomic.Bool
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) }}))
	resp, err := t.roundTrip(r)
	if err != nil && !gotConn.Load() {
		return nil, fmt.Errorf("%w: %w", errNotSent, err)
	}
	return resp, err
}

func (t *tapTransport) roundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	// The call the request carries (the SDK sends one message per POST), if any: its
	// answer is read here, bounded, and one oncebox cannot read is replaced by an error
	// for that call alone.
	var call any
	for _, m := range wireMessages(body) {
		t.tap.sent(m.ID, m.Method, m.Params)
		if m.ID != nil && m.Method != "" && call == nil {
			call = m.ID
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	return t.guard(resp, call), nil
}

// guard bounds an upstream's answer before the SDK's client reads it, and puts an error
// for the call in place of one the client would break the whole session on. The media
// type is read as the client reads it (mediaType): Application/JSON is JSON, with any
// parameters and spacing. A non-2xx body is cut at the limit (the client reads it whole
// for a JSON-RPC error); a 2xx answer to a call is read at most to the limit when it
// is JSON, passed event by event (each bounded) when it is SSE, and refused when it is
// neither (the client would end the session on it). A standalone stream (call nil) has
// its bad events dropped.
func (t *tapTransport) guard(resp *http.Response, call any) *http.Response {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body = &limitedBody{Reader: io.LimitReader(resp.Body, t.limit), Closer: resp.Body}
		return resp
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "text/event-stream":
		resp.Body = &sseGuard{src: bufio.NewReaderSize(resp.Body, 64<<10), body: resp.Body, tap: t.tap, call: call, limit: t.limit}
		return resp
	case "application/json":
		if call == nil {
			resp.Body = &limitedBody{Reader: io.LimitReader(resp.Body, t.limit), Closer: resp.Body}
			return resp
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, t.limit+1))
		_ = resp.Body.Close()
		if err == nil {
			why := ""
			if int64(len(b)) > t.limit {
				why = answerTooLarge
			} else if _, derr := jsonrpc.DecodeMessage(b); derr != nil {
				why = answerMalformed
			}
			if why != "" {
				b = t.refuse(resp, call, why)
			}
		}
		for _, m := range wireMessages(b) {
			t.tap.answered(m.ID, m.Result)
		}
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
		return resp
	}
	if call != nil {
		// Neither JSON nor SSE: the client would fail the session ("unsupported content
		// type"); only the call fails.
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(t.refuse(resp, call, answerMalformed)))
	}
	return resp
}

// refuse notes that oncebox answers call itself, for why, and returns that answer,
// resp's headers made to carry it (JSON, its length).
func (t *tapTransport) refuse(resp *http.Response, call any, why string) []byte {
	t.tap.spoil(call, why)
	b := refusal(call, why, t.limit)
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
	resp.ContentLength = int64(len(b))
	return b
}

// mediaType is the media type of a Content-Type header as the SDK's client reads it
// (mime.ParseMediaType, which lowercases it and drops the parameters), "" when it does
// not parse: the client then refuses the answer as of an unsupported type.
func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	return mt
}

// limitedBody is a body read no further than a limit.
type limitedBody struct {
	io.Reader
	io.Closer
}

// errReader returns err (or io.EOF) at the end of a body read ahead.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// sseGuard passes an SSE stream on event by event, catching the answers it carries.
// It reads each event as the SDK's client does (its scanEventsLimited): lines up to a
// blank one or the stream's end, each "field: value" (a line with no colon is
// malformed), the data lines trimmed and joined. An event larger than the limit, with
// a line that is no field or whose data is no JSON-RPC message ends the stream with an
// error for the stream's call in its place (the SDK's client would break the whole
// session on it); on the standalone stream (no call) such an event is dropped, and one
// too large ends the stream (the client opens it again).
type sseGuard struct {
	src   *bufio.Reader
	body  io.Closer
	tap   *rawTap
	call  any
	limit int64
	out   []byte
	err   error
}

func (g *sseGuard) Read(p []byte) (int, error) {
	for len(g.out) == 0 && g.err == nil {
		g.next()
	}
	if len(g.out) > 0 {
		n := copy(p, g.out)
		g.out = g.out[n:]
		return n, nil
	}
	return 0, g.err
}

func (g *sseGuard) Close() error { return g.body.Close() }

// refuse ends the stream with an error for its call, or, on the standalone stream,
// drops the event (ends the stream when it is too large to skip).
func (g *sseGuard) refuse(why string) {
	if g.call == nil {
		g.out = nil
		if why == answerTooLarge {
			g.err = io.EOF
		}
		return
	}
	g.tap.spoil(g.call, why)
	g.out = append(append(append(g.out[:0], "event: message\ndata: "...), refusal(g.call, why, g.limit)...), "\n\n"...)
	g.err = io.EOF
}

// next reads one event into out, or sets err.
func (g *sseGuard) next() {
	var raw, data []byte
	name, hasData := "", false
	for {
		line, err := g.line(int64(len(raw)))
		if errors.Is(err, errEventTooLarge) {
			g.refuse(answerTooLarge)
			return
		}
		if err != nil && !errors.Is(err, io.EOF) {
			g.out, g.err = raw, err // a broken stream is passed on as it broke; the SDK decides
			return
		}
		eof := err != nil
		raw = append(raw, line...)
		text := bytes.TrimRight(line, "\r\n")
		if len(text) > 0 {
			field, value, ok := bytes.Cut(text, []byte(":"))
			if !ok {
				g.refuse(answerMalformed)
				return
			}
			switch string(field) {
			case "event":
				name = string(bytes.TrimSpace(value))
			case "data":
				if hasData {
					data = append(data, '\n')
				}
				data, hasData = append(data, bytes.TrimSpace(value)...), true
			}
		}
		if len(text) > 0 && !eof {
			continue
		}
		if len(data) > 0 && (name == "" || name == "message") {
			msgs := wireMessages(data)
			if _, derr := jsonrpc.DecodeMessage(data); derr != nil || len(msgs) == 0 {
				g.refuse(answerMalformed)
				return
			}
			for _, m := range msgs {
				g.tap.answered(m.ID, m.Result)
			}
		}
		g.out = raw
		if eof {
			g.err = io.EOF
		}
		return
	}
}

var errEventTooLarge = errors.New("SSE event too large")

// line reads one line (with io.EOF when the stream ends on it, as bufio does), failing
// once the event (had bytes so far) would pass the limit.
func (g *sseGuard) line(had int64) ([]byte, error) {
	var line []byte
	for {
		frag, err := g.src.ReadSlice('\n')
		if had+int64(len(line)+len(frag)) > g.limit {
			return nil, errEventTooLarge
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

// tapStdio catches the raw results of a stdio upstream's dispatches in its
// connection.
type tapStdio struct {
	inner mcp.Transport
	tap   *rawTap
	limit int64
}

func (t *tapStdio) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: c, tap: t.tap, limit: t.limit}, nil
}

type tapConn struct {
	mcp.Connection
	tap   *rawTap
	limit int64
}

func (c *tapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		c.tap.sent(req.ID.Raw(), req.Method, req.Params)
	}
	return c.Connection.Write(ctx, msg)
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil && resp.ID.IsValid() {
		if int64(len(resp.Result)) > c.limit {
			c.tap.spoil(resp.ID.Raw(), answerTooLarge)
			return &jsonrpc.Response{ID: resp.ID, Error: &jsonrpc.Error{Code: codeAnswerRefused,
				Message: fmt.Sprintf("oncebox: the upstream's answer is larger than max_result_bytes (%d bytes); it was not kept", c.limit)}}, nil
		}
		c.tap.answered(resp.ID.Raw(), resp.Result)
	}
	return msg, err
}
