package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
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
}

func newRawTap() *rawTap {
	return &rawTap{byOp: map[string]*rawSlot{}, byID: map[string]*rawSlot{}}
}

// expect starts catching the result of the dispatch of opID; done returns it (nil when
// it was not caught) and stops.
func (t *rawTap) expect(opID string) (done func() json.RawMessage) {
	slot := &rawSlot{}
	t.mu.Lock()
	t.byOp[opID] = slot
	t.mu.Unlock()
	return func() json.RawMessage {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.byOp, opID)
		if slot.id != "" {
			delete(t.byID, slot.id)
		}
		return slot.raw
	}
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
}

func (t *tapTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.Body == nil {
		return t.base.RoundTrip(r)
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
	tracked := false
	for _, m := range wireMessages(body) {
		if t.tap.sent(m.ID, m.Method, m.Params) {
			tracked = true
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil || !tracked {
		return resp, err
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/json"):
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		for _, m := range wireMessages(b) {
			t.tap.answered(m.ID, m.Result)
		}
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
	case strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &sseTap{ReadCloser: resp.Body, tap: t.tap}
	}
	return resp, nil
}

// errReader returns err (or io.EOF) at the end of a body read ahead.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// sseTap reads the data lines of an SSE stream as it passes, for the answers they
// carry.
type sseTap struct {
	io.ReadCloser
	tap  *rawTap
	line []byte
	data []byte
}

func (s *sseTap) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	for _, c := range p[:n] {
		if c != '\n' {
			s.line = append(s.line, c)
			continue
		}
		line := bytes.TrimSuffix(s.line, []byte("\r"))
		s.line = s.line[:0]
		switch {
		case len(line) == 0: // the event ends
			for _, m := range wireMessages(s.data) {
				s.tap.answered(m.ID, m.Result)
			}
			s.data = s.data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			s.data = append(s.data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
			s.data = append(s.data, '\n')
		}
	}
	return n, err
}

// tapStdio catches the raw results of a stdio upstream's dispatches in its
// connection.
type tapStdio struct {
	inner mcp.Transport
	tap   *rawTap
}

func (t *tapStdio) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: c, tap: t.tap}, nil
}

type tapConn struct {
	mcp.Connection
	tap *rawTap
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
		c.tap.answered(resp.ID.Raw(), resp.Result)
	}
	return msg, err
}
