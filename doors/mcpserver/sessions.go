package mcpserver

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sjson "github.com/segmentio/encoding/json"
)

// CodeTooManySessions is the JSON-RPC error code of an initialize refused because the
// tenant already holds Config.MaxSessionsPerTenant sessions.
const CodeTooManySessions = -32011

// DefaultSessionIdleTimeout is how long an HTTP session may stay idle before it is
// closed, when Config.SessionIdleTimeout is 0.
const DefaultSessionIdleTimeout = 5 * time.Minute

// DefaultMaxSessionsPerTenant is Config.MaxSessionsPerTenant's default.
const DefaultMaxSessionsPerTenant = 100

// Sessions returns how many MCP sessions over HTTP are open now, over all tenants.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, srv := range s.tenants {
		for range srv.Sessions() {
			n++
		}
	}
	return n
}

// tenantSessions returns how many sessions the tenant holds open now: the sessions a
// client opened with initialize. The SDK also lists, for a moment, the session it makes
// to answer a stateless server/discover request, which the SDK's own client sends
// before its initialize; counting that one refused an initialize under the cap when the
// machine was busy.
func (s *Server) tenantSessions(tenantID int64) int {
	s.mu.Lock()
	srv := s.tenants[tenantID]
	s.mu.Unlock()
	n := 0
	if srv != nil {
		for ss := range srv.Sessions() {
			if ss.InitializeParams() != nil {
				n++
			}
		}
	}
	return n
}

// initGate returns the tenant's gate for initializes: a channel of one slot that an
// initialize holds from the count of the tenant's sessions until the SDK has opened
// (or closed) its session, so concurrent initializes cannot overshoot the cap.
func (s *Server) initGate(tenantID int64) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.initGates[tenantID]
	if !ok {
		g = make(chan struct{}, 1)
		s.initGates[tenantID] = g
	}
	return g
}

// limitSessions refuses a new session of a tenant that already holds
// MaxSessionsPerTenant, with a JSON-RPC error the client shows as it is. A request
// opens a session when it is a POST without Mcp-Session-Id whose body holds an
// initialize request, read as the SDK reads it (initializeRequests): a JSON-RPC batch
// counts, and so does a body whose keys differ from "method" only in case. Initializes
// of one tenant pass one at a time, so the cap holds under concurrency.
func (s *Server) limitSessions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			next.ServeHTTP(w, r)
			return
		}
		id, ok := tenantOf(auth.TokenInfoFromContext(r.Context()))
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes+1))
		if err != nil {
			http.Error(w, "the request body could not be read", http.StatusBadRequest)
			return
		}
		if len(body) > mcp.DefaultMaxRequestBodyBytes {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mcp.DefaultMaxRequestBodyBytes), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		inits, batch := initializeRequests(body)
		if len(inits) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		gate := s.initGate(id)
		select {
		case gate <- struct{}{}:
		case <-r.Context().Done():
			http.Error(w, "the request was cancelled while it waited for the tenant's other initializes", http.StatusServiceUnavailable)
			return
		}
		defer func() { <-gate }()
		if s.tenantSessions(id) < s.cfg.MaxSessionsPerTenant {
			next.ServeHTTP(w, r)
			return
		}
		s.refuseSession(w, inits, batch)
	})
}

// refuseSession answers each initialize with CodeTooManySessions: one JSON-RPC
// response, or an array of them when the request was a batch.
func (s *Server) refuseSession(w http.ResponseWriter, inits []*jsonrpc.Request, batch bool) {
	jerr := &jsonrpc.Error{Code: CodeTooManySessions,
		Message: fmt.Sprintf("too many open MCP sessions for this tenant (the limit is %d): close sessions you no longer use "+
			"(an idle session is closed after %s), or reuse an open one", s.cfg.MaxSessionsPerTenant, s.cfg.SessionIdleTimeout)}
	var answers [][]byte
	for _, req := range inits {
		b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: jerr})
		if err != nil {
			http.Error(w, "the refusal could not be encoded", http.StatusBadRequest)
			return
		}
		answers = append(answers, b)
	}
	out := answers[0]
	if batch {
		out = append(append([]byte("["), bytes.Join(answers, []byte(","))...), ']')
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// initializeRequests returns the initialize requests in body, decoded exactly as the
// SDK's streamable transport decodes a POST (its readBatch): first as a JSON-RPC
// batch, with the SDK's own JSON decoder that matches keys case-sensitively, then as
// one message; each message with jsonrpc.DecodeMessage. batch reports whether the
// body was an array. A body the SDK cannot decode opens no session and has none.
func initializeRequests(body []byte) (inits []*jsonrpc.Request, batch bool) {
	var raws []sjson.RawMessage
	dec := sjson.NewDecoder(bytes.NewReader(body))
	dec.DontMatchCaseInsensitiveStructFields()
	if dec.Decode(&raws) == nil {
		batch = true
	} else {
		raws = []sjson.RawMessage{body}
	}
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
			inits = append(inits, req)
		}
	}
	return inits, batch
}
