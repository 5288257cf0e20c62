package mcpserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/oncebox/oncebox/internal/sameorigin"
	"github.com/oncebox/oncebox/protocol"
)

// originAllowed says whether a browser at origin may call /mcp: a loopback origin, or
// one of Config.AllowedOrigins (compared as scheme, host and port).
func (s *Server) originAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	switch strings.ToLower(u.Hostname()) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	for _, a := range s.cfg.AllowedOrigins {
		if au, err := url.Parse(a); err == nil && sameorigin.Same(u, au) {
			return true
		}
	}
	return false
}

// refuseOrigin answers a request from a browser origin /mcp does not allow: 403
// cross-origin, problem+json, nothing read or recorded.
func refuseOrigin(w http.ResponseWriter, origin string) {
	p := protocol.NewProblem(http.StatusForbidden, protocol.ProblemCrossOrigin,
		fmt.Sprintf("Origin %q may not call /mcp: only requests without Origin (agents, gateways), from loopback "+
			"or from an origin the operator allows (--public-url, --mcp-allowed-origins) are served.", origin))
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(p)
}
