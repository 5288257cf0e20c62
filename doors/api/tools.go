package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendorapi"
)

// ToolInfo describes one tool for GET /v1/tools.
type ToolInfo struct {
	// Name is the tool's name in POST /v1/ops, such as "helpdesk.create_ticket".
	Name string `json:"name"`
	// Class is "read" (answered at once, no op), "write" (an op) or "unsafe" (an op
	// that waits for a person's approval).
	Class string `json:"class"`
	// Description says what the tool does.
	Description string `json:"description"`
	// InputSchema is the JSON Schema of the tool's arguments.
	InputSchema json.RawMessage `json:"input_schema"`
	// Tenant, when set, is the only tenant the tool is listed to (a tool of its own
	// catalog). 0: every tenant.
	Tenant int64 `json:"-"`
}

// Reader calls read tools (the tool catalog's): at once, with no op and no key.
type Reader interface {
	// IsReadFor reports whether tool is a read tool the tenant tenantID may call (false
	// for another tenant's own tool: to that tenant it does not exist).
	IsReadFor(tenantID int64, tool string) bool
	// Read calls a read tool and returns the target's answer, an
	// *vendorapi.ValidationError for invalid arguments, or another error (free of
	// secrets) for a call that failed.
	Read(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error)
}

// SetTools replaces the list GET /v1/tools answers (Config.Tools), such as on a
// reload of the tool catalog.
func (s *Server) SetTools(tools []ToolInfo) {
	list := slices.Clone(tools)
	s.tools.Store(&list)
}

// listTools is GET /v1/tools: every tool with its class and input schema.
func (s *Server) listTools(w http.ResponseWriter, _ *http.Request, t *tenant.Principal) {
	list := []ToolInfo{}
	for _, info := range *s.tools.Load() {
		if info.Tenant == 0 || info.Tenant == t.ID {
			list = append(list, info)
		}
	}
	slices.SortFunc(list, func(a, b ToolInfo) int { return strings.Compare(a.Name, b.Name) })
	body, _ := json.Marshal(struct {
		Tools []ToolInfo `json:"tools"`
	}{list})
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, body)
}

// readResult is the answer of POST /v1/ops for a read tool.
type readResult struct {
	Tool   string          `json:"tool"`
	Result json.RawMessage `json:"result"`
}

// callRead answers POST /v1/ops for a read tool: the target is called at once and its
// answer returned; nothing is recorded and no key is needed.
func (s *Server) callRead(w http.ResponseWriter, r *http.Request, req opRequest) {
	args := req.Args
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	res, err := s.cfg.Reads.Read(r.Context(), req.Tool, args)
	if err != nil {
		var ve *vendorapi.ValidationError
		if errors.As(err, &ve) {
			writeProblem(w, validationProblem(err))
			return
		}
		writeProblem(w, protocol.NewProblem(http.StatusBadGateway, protocol.ProblemReadFailed,
			"The read tool "+req.Tool+" could not get an answer from its target: "+err.Error()+". Nothing was changed; you may call it again."))
		return
	}
	body, _ := json.Marshal(readResult{Tool: req.Tool, Result: res})
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, body)
}
