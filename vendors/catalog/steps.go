package catalog

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oncebox/oncebox/vendorapi"
)

// stepFormat is one entry of a composite tool's steps: in the file.
type stepFormat struct {
	Name       string          `yaml:"name"`
	Tool       string          `yaml:"tool"`
	Args       map[string]any  `yaml:"args"`
	When       string          `yaml:"when"`
	Compensate *stepCallFormat `yaml:"compensate"`
}

type stepCallFormat struct {
	Tool string         `yaml:"tool"`
	Args map[string]any `yaml:"args"`
}

// checkComposite checks a tool with steps: (docs/steps.md): a description, an input
// schema, the steps (each a tool of its own, never a composite one of this file), and
// only the op fields ttl and approval; it has no class, target, method or path.
func (c *Catalog) checkComposite(name string, f toolFormat, bad badFunc) (*Tool, error) {
	switch {
	case f.Class != "" || f.Target != "" || f.Method != "" || f.Path != "":
		return nil, bad("steps", "a tool with steps calls other tools: it has no class, target, method or path")
	case f.Identity != nil || f.Owned != nil || f.DedupeWindow != "":
		return nil, bad("steps", "a tool with steps takes no identity, owned or dedupe_window (its steps' tools do)")
	}
	t := &Tool{Name: name, Description: strings.TrimSpace(f.Description), Class: ClassWrite}
	if t.Description == "" {
		return nil, bad("description", "is required: it is what an agent reads to choose the tool")
	}
	if err := checkToolSchema(t, f, bad); err != nil {
		return nil, err
	}
	ops, err := checkOpFields("", f.TTL, "", f.Approval, bad)
	if err != nil {
		return nil, err
	}
	t.TTL, t.Approval = ops.ttl, ops.approval
	for i, s := range f.Steps {
		step, err := stepOf(s)
		if err != nil {
			return nil, bad(fmt.Sprintf("steps[%d]", i), err.Error())
		}
		t.Steps = append(t.Steps, step)
	}
	if err := vendorapi.CheckSteps(t.Steps); err != nil {
		return nil, bad("steps", err.Error())
	}
	names := make([]string, len(t.Steps))
	for i, s := range t.Steps {
		names[i] = s.Name + " (" + s.Tool + ")"
	}
	t.Description += " Steps, each done once, in order: " + strings.Join(names, ", then ") + "."
	t.Version = version(t)
	return t, nil
}

// checkNoNesting refuses a step whose tool is a composite tool of the file: steps call
// side effects, not other step lists.
func (c *Catalog) checkNoNesting() error {
	for _, name := range c.Names() {
		for _, s := range c.Tools[name].Steps {
			for _, tool := range []string{s.Tool, compensateTool(s)} {
				if o, ok := c.Tools[tool]; ok && len(o.Steps) > 0 {
					return &Error{File: c.File, Kind: "tool", Name: name, Field: "steps",
						Message: fmt.Sprintf("step %s calls %s, a tool with steps: steps do not nest", s.Name, tool)}
				}
				if o, ok := c.Tools[tool]; ok && o.Class == ClassRead {
					return &Error{File: c.File, Kind: "tool", Name: name, Field: "steps",
						Message: fmt.Sprintf("step %s calls %s, a read tool: a step is a side effect", s.Name, tool)}
				}
			}
		}
	}
	return nil
}

func compensateTool(s vendorapi.Step) string {
	if s.Compensate == nil {
		return ""
	}
	return s.Compensate.Tool
}

func stepOf(s stepFormat) (vendorapi.Step, error) {
	out := vendorapi.Step{Name: s.Name, Tool: s.Tool, When: s.When}
	var err error
	if out.Args, err = argsJSON(s.Args); err != nil {
		return out, err
	}
	if s.Compensate != nil {
		out.Compensate = &vendorapi.StepCall{Tool: s.Compensate.Tool}
		if out.Compensate.Args, err = argsJSON(s.Compensate.Args); err != nil {
			return out, err
		}
	}
	return out, nil
}

func argsJSON(m map[string]any) (json.RawMessage, error) {
	if m == nil {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("args cannot be written as JSON: %w", err)
	}
	return b, nil
}
