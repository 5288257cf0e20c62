package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncebox/oncebox/doors/pgavail"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
)

// Classes of an ExtraTool.
const (
	// ClassRead is answered at once by ExtraTool.Read, with no op.
	ClassRead = "read"
	// ClassWrite is an op of the outbox, like a built-in tool.
	ClassWrite = "write"
	// ClassUnsafe is an op of the outbox that waits for a person's approval.
	ClassUnsafe = "unsafe"
)

// ExtraTool is a tool offered besides the built-in ones, such as a tool of the tool
// catalog (package catalog). A write or unsafe tool must be in the outbox's registry
// under Name; its calls are recorded and deduplicated exactly like a built-in tool's.
type ExtraTool struct {
	// Name is the oncebox tool name, such as "helpdesk.create_ticket"; MCP clients
	// see it with dots as underscores.
	Name string
	// Description tells the model what the tool does.
	Description string
	// InputSchema is the JSON Schema of the arguments (its root of type object).
	InputSchema json.RawMessage
	// Class is ClassRead, ClassWrite or ClassUnsafe; it decides the annotations
	// (readOnlyHint for read, destructiveHint for unsafe, idempotentHint for write and
	// unsafe; openWorldHint for all).
	Class string
	// Read answers a read tool's call: the answer, or an *vendorapi.ValidationError for
	// invalid arguments, or another error for a failed call. Required for read tools.
	Read func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
	// Passthrough says a read tool's answer is an upstream MCP server's
	// CallToolResult, returned as it is; and that a write or unsafe tool's op's stored result is an upstream MCP server's
	// CallToolResult (a tool of an upstream in the catalog): once the op succeeded, or
	// failed with one, that CallToolResult is the answer, new or replayed, with the op's
	// id, status and replayed flag in its _meta ("oncebox/op_id", "oncebox/status",
	// "oncebox/replayed").
	Passthrough bool
	// Tenant, when set, is the only tenant offered the tool (a tool of its own
	// catalog): the servers of other tenants do not list it, and a call of it there is
	// a call of a tool that does not exist. 0: every tenant.
	Tenant int64
}

// passthrough returns the upstream CallToolResult a settled op of a passthrough tool
// holds, or nil.
func (s *Server) passthrough(tool string, op *outbox.Op, replayed bool) *mcp.CallToolResult {
	pass := false
	for _, t := range s.cfg.Tools {
		if t.Name == tool {
			pass = t.Passthrough
		}
	}
	if !pass {
		return nil
	}
	var raw json.RawMessage
	switch op.Status {
	case protocol.StatusSucceeded:
		raw = op.Result
	case protocol.StatusFailed:
		var e struct {
			Vendor json.RawMessage `json:"vendor"`
		}
		if json.Unmarshal(op.Error, &e) == nil {
			raw = e.Vendor
		}
	}
	if len(raw) == 0 {
		return nil
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil || (res.Content == nil && res.StructuredContent == nil) {
		return nil
	}
	// The structured content as stored (its keys in the upstream's order), not as
	// decoded into a map.
	var stored struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if json.Unmarshal(raw, &stored) == nil && len(stored.StructuredContent) > 0 && string(stored.StructuredContent) != "null" {
		res.StructuredContent = stored.StructuredContent
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta["oncebox/op_id"] = op.ID
	res.Meta["oncebox/status"] = string(op.Status)
	res.Meta["oncebox/replayed"] = replayed
	return &res
}

// extraSet is the extra tools in force and the dedupe windows of every tool.
type extraSet struct {
	tools   []ExtraTool
	windows map[string]time.Duration
}

// window returns the dedupe window of tool under this set, reg holding the tool.
// A window is never longer than the tool's TTL.
func (x *extraSet) window(reg *outbox.Registry, tool string) time.Duration {
	d, ok := x.windows[tool]
	if !ok {
		d = DefaultDedupeWindow
	}
	if t, ok := reg.Lookup(tool); ok && t.TTL > 0 && t.TTL < d {
		d = t.TTL
	}
	return d
}

// NoWindow returns, sorted, the write and unsafe tools offered whose calls naming no
// conversation are deduplicated only within their MCP session or stdio process (their
// dedupe window is 0): `oncebox serve` logs them at start.
func (s *Server) NoWindow() []string {
	x := s.extra.Load()
	var out []string
	for _, spec := range s.specs {
		if x.window(s.ob.Tools(), spec.Tool) <= 0 {
			out = append(out, spec.Tool)
		}
	}
	for _, t := range x.tools {
		if t.Class != ClassRead && x.window(s.ob.Tools(), t.Name) <= 0 {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out
}

// SetTools replaces the extra tools (Config.Tools) and the dedupe windows
// (Config.DedupeWindows), such as on a reload of the tool catalog: for the servers
// made from now on and for each tenant's server of HTTPHandler, whose clients get
// notifications/tools/list_changed. Write and unsafe tools must be in the outbox's
// registry already. On an error (CheckTools's) nothing changes. Calls in progress
// finish under the tool they started with.
func (s *Server) SetTools(tools []ExtraTool, windows map[string]time.Duration) error {
	if err := s.CheckTools(tools, windows, s.ob.Tools()); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.extra.Load().tools
	s.extra.Store(&extraSet{tools: tools, windows: windows})
	for id, srv := range s.tenants {
		if gone := goneFor(id, old, tools); len(gone) > 0 {
			srv.RemoveTools(gone...)
		}
		s.addExtra(srv, id, s.instances[id], tools) // AddTool replaces a tool of the same name
	}
	return nil
}

// CheckTools reports whether SetTools would take tools and windows, reg being the
// registry the outbox will hold then: a reload checks before it changes anything.
func (s *Server) CheckTools(tools []ExtraTool, windows map[string]time.Duration, reg *outbox.Registry) error {
	for tool, d := range windows {
		if d < 0 {
			return fmt.Errorf("mcpserver: the dedupe window of %s is negative (%s); 0 turns it off", tool, d)
		}
	}
	return s.checkExtra(tools, reg)
}

// goneFor returns the MCP names of the tools of old offered to the tenant tenantID
// that next no longer offers it.
func goneFor(tenantID int64, old, next []ExtraTool) []string {
	keep := map[string]bool{}
	for _, t := range next {
		if t.Tenant == 0 || t.Tenant == tenantID {
			keep[t.Name] = true
		}
	}
	var gone []string
	for _, t := range old {
		if (t.Tenant == 0 || t.Tenant == tenantID) && !keep[t.Name] {
			gone = append(gone, mcpToolName(t.Name))
		}
	}
	return gone
}

// checkExtra checks extra tools against reg (the outbox's registry) and the MCP names
// of each tenant's view: the built-in tools, the tools for every tenant and the
// tenant's own. Two tools of one view may not share an MCP name; tools of two tenants
// never meet in a view.
func (s *Server) checkExtra(tools []ExtraTool, reg *outbox.Registry) error {
	shared := map[string]string{}
	for _, spec := range s.specs {
		shared[mcpToolName(spec.Tool)] = spec.Tool
	}
	own := map[int64][]ExtraTool{}
	for _, t := range tools {
		if err := checkExtraTool(t, reg); err != nil {
			return err
		}
		if t.Tenant != 0 {
			own[t.Tenant] = append(own[t.Tenant], t)
		} else if err := claimMCPName(shared, t.Name); err != nil {
			return err
		}
	}
	for _, ts := range own {
		view := maps.Clone(shared)
		for _, t := range ts {
			if err := claimMCPName(view, t.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// claimMCPName adds the MCP name of the tool name to a view, unless another tool has it.
func claimMCPName(view map[string]string, name string) error {
	m := mcpToolName(name)
	if other, dup := view[m]; dup {
		return fmt.Errorf("mcpserver: tools %q and %q have the same MCP name %q", other, name, m)
	}
	view[m] = name
	return nil
}

// checkExtraTool checks one extra tool's MCP name, class and registration in reg.
func checkExtraTool(t ExtraTool, reg *outbox.Registry) error {
	if name := mcpToolName(t.Name); !validMCPName(name) {
		return fmt.Errorf("mcpserver: tool %q: its MCP name %q is not ^[a-zA-Z0-9_-]{1,64}$", t.Name, name)
	}
	switch t.Class {
	case ClassRead:
		if t.Read == nil {
			return fmt.Errorf("mcpserver: read tool %q has no Read", t.Name)
		}
	case ClassWrite, ClassUnsafe:
		if _, ok := reg.Lookup(t.Name); !ok {
			return fmt.Errorf("mcpserver: %s tool %q is not in the outbox's registry", t.Class, t.Name)
		}
	default:
		return fmt.Errorf("mcpserver: tool %q: class %q is not read, write or unsafe", t.Name, t.Class)
	}
	return nil
}

// validMCPName reports whether name matches ^[a-zA-Z0-9_-]{1,64}$, what the strictest
// clients accept.
func validMCPName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// addExtra adds extra tools to srv.
func (s *Server) addExtra(srv *mcp.Server, tenantID int64, instance string, tools []ExtraTool) {
	for _, t := range tools {
		if t.Tenant != 0 && t.Tenant != tenantID {
			continue
		}
		openWorld := true
		readOnly := t.Class == ClassRead
		destructive := t.Class == ClassUnsafe
		tool := &mcp.Tool{
			Name:        mcpToolName(t.Name),
			Description: t.Description,
			InputSchema: t.InputSchema,
			Annotations: &mcp.ToolAnnotations{
				Title:           t.Name,
				ReadOnlyHint:    readOnly,
				DestructiveHint: &destructive,
				IdempotentHint:  !readOnly,
				OpenWorldHint:   &openWorld,
			},
		}
		if readOnly {
			srv.AddTool(tool, s.readHandler(tenantID, t))
			continue
		}
		tool.Description += occurrenceHelp
		tool.InputSchema = withOccurrence(t.InputSchema)
		if t.Class == ClassUnsafe {
			tool.Description += " Every call waits for a person's approval before it is carried out."
		}
		srv.AddTool(tool, s.toolHandler(tenantID, t.Name, instance))
	}
}

// readHandler answers a read tool's call at once: no op, no key.
func (s *Server) readHandler(tenantID int64, t ExtraTool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil {
			if id, ok := tenantOf(req.Extra.TokenInfo); ok && id != tenantID {
				return nil, errors.New("this MCP session belongs to another tenant")
			}
		}
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		log := s.logger.With(slog.Int64("tenant", tenantID), slog.String("tool", t.Name))
		answer, err := t.Read(ctx, args)
		if err != nil {
			if r := refusal(err); r != nil {
				return r, nil
			}
			if pgavail.Unavailable(err) {
				return nil, s.storeUnavailable(ctx, log, err)
			}
			log.LogAttrs(ctx, slog.LevelDebug, "mcp read tool failed", slog.Any("error", err))
			return errorResult("The call failed: " + err.Error() + ". It changed nothing (a read tool only reads); you may call it again."), nil
		}
		if t.Passthrough {
			var res mcp.CallToolResult
			if err := json.Unmarshal(answer, &res); err == nil {
				return &res, nil // the upstream's own answer
			}
		}
		var structured map[string]any
		_ = json.Unmarshal(answer, &structured)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(answer)}}, StructuredContent: structured}, nil
	}
}

// BuiltinTools returns the four built-in tools as ExtraTool values of class write,
// with the input schemas MCP offers (without "occurrence"), for listings such as GET
// /v1/tools.
func BuiltinTools() []ExtraTool {
	var out []ExtraTool
	for _, spec := range builtinSpecs() {
		out = append(out, ExtraTool{Name: spec.Tool, Description: spec.Description, InputSchema: spec.InputSchema, Class: ClassWrite})
	}
	return out
}
