package catalog

import (
	"encoding/json"
	"fmt"
)

// Definition is what an op of a catalog tool keeps of its tool's definition: it is
// stored with the op when the op is accepted (vendorapi.Tool.Definition) and the op is
// sent with it, whatever the catalog says by then (a reload, a restart with a changed
// file, the tool removed). Arguments were validated against the schema of Version
// when the op was accepted, and are not validated again.
type Definition struct {
	// Version is the tool's Version when the op was accepted.
	Version string `json:"version"`
	// Target names the target the op is sent to.
	Target string `json:"target"`
	// Method is the HTTP method.
	Method string `json:"method"`
	// Path is the path template, with {arg} templates.
	Path string `json:"path"`
	// Upstream names the upstream MCP server of an upstream tool's op ("" for a
	// target's tool); Target is the same name then.
	Upstream string `json:"upstream,omitempty"`
	// UpstreamTool is the tool's name on its upstream: the tools/call the op makes.
	UpstreamTool string `json:"upstream_tool,omitempty"`
	// TagArgument is the argument that receives the op id, if any.
	TagArgument string `json:"tag_argument,omitempty"`
}

// Definition returns what an op of t keeps of t.
func (t *Tool) Definition() Definition {
	return Definition{Version: t.Version, Target: t.Target, Method: t.Method, Path: t.Path,
		Upstream: t.Upstream, UpstreamTool: t.UpstreamTool, TagArgument: t.TagArgument}
}

// definitionJSON is t's Definition as stored with an op.
func (t *Tool) definitionJSON() json.RawMessage {
	b, _ := json.Marshal(t.Definition())
	return b
}

// parseDefinition reads a stored Definition back as a tool that can build the op's
// request (name, target, method, path and its templates).
func parseDefinition(name string, raw json.RawMessage) (*Tool, error) {
	var d Definition
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("the tool definition stored with the op is not readable: %w", err)
	}
	if d.Upstream != "" {
		if d.UpstreamTool == "" {
			return nil, fmt.Errorf("the tool definition stored with the op lacks its upstream tool")
		}
		return &Tool{Name: name, Target: d.Target, Upstream: d.Upstream, UpstreamTool: d.UpstreamTool, TagArgument: d.TagArgument,
			Version: d.Version}, nil
	}
	if d.Target == "" || d.Method == "" || d.Path == "" {
		return nil, fmt.Errorf("the tool definition stored with the op lacks its target, method or path")
	}
	t := &Tool{Name: name, Target: d.Target, Method: d.Method, Path: d.Path, Version: d.Version}
	for _, m := range template.FindAllStringSubmatch(d.Path, -1) {
		t.params = append(t.params, m[1])
	}
	return t, nil
}
