package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
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

// tenantSessions returns how many sessions the tenant holds open now.
func (s *Server) tenantSessions(tenantID int64) int {
	s.mu.Lock()
	srv := s.tenants[tenantID]
	s.mu.Unlock()
	n := 0
	if srv != nil {
		for range srv.Sessions() {
			n++
		}
	}
	return n
}

// limitSessions refuses a new session (an initialize without Mcp-Session-Id) of a
// tenant that already holds MaxSessionsPerTenant, with a JSON-RPC error the client
// shows as it is. Concurrent initializes may overshoot the cap by a few.
func (s *Server) limitSessions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			next.ServeHTTP(w, r)
			return
		}
		id, ok := tenantOf(auth.TokenInfoFromContext(r.Context()))
		if !ok || s.tenantSessions(id) < s.cfg.MaxSessionsPerTenant {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, "the request body could not be read", http.StatusBadRequest)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Method != "initialize" || len(msg.ID) == 0 {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		answer, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0",
			"id":      msg.ID,
			"error": map[string]any{
				"code": CodeTooManySessions,
				"message": fmt.Sprintf("too many open MCP sessions for this tenant (the limit is %d): close sessions you no longer use "+
					"(an idle session is closed after %s), or reuse an open one", s.cfg.MaxSessionsPerTenant, s.cfg.SessionIdleTimeout),
			},
		})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(answer)
	})
}
