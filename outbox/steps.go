package outbox

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// StepsVendor is the vendor of composite tools (Tool.Steps): their ops are never
// dispatched; the step runner (a River job of kind "oncebox.steps") runs their steps,
// each an op of its own, and settles them (docs/steps.md).
const StepsVendor = "steps"

// StepKeyPrefix begins every key the step runner derives (StepKey). A caller's key may
// not begin with it (Prepare refuses it), so no call can forge a step's op.
const StepKeyPrefix = "~step/"

// stepName is what a step may be called.
var stepName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// Step is one step of a composite tool: a call of another tool (built-in, catalog or
// upstream, never a composite one), with arguments built from the composite call and
// from earlier steps.
type Step struct {
	// Name names the step, unique in its tool: 1 to 40 lower-case letters, digits and
	// '_', starting with a letter. It derives the step's key (StepKey).
	Name string `json:"name"`
	// Tool is the tool the step calls.
	Tool string `json:"tool"`
	// Args is the step's arguments as a template: a JSON object whose values are
	// literals, except that an object {"$from": "<JSON pointer>"} is replaced by the
	// value the pointer names in {"call": <the composite call's arguments>, "steps":
	// {"<earlier step>": {"op_id", "status", "vendor_ref", "result"}}}. A pointer that
	// names nothing refuses the step. Defaults to {}.
	Args json.RawMessage `json:"args,omitempty"`
	// When, if set, is a JSON pointer into the same document: the step runs only when
	// it names a value other than null and false, and is skipped otherwise.
	When string `json:"when,omitempty"`
	// Compensate, if set, is the call that undoes the step (a refund for a charge): it
	// runs, once, when a later step fails for good, after the step succeeded.
	Compensate *StepCall `json:"compensate,omitempty"`
}

// StepCall is a tool and its argument template (Step.Args).
type StepCall struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
}

// StepKey is the idempotency key of the op of step name of the composite op
// parentOpID: "~step/<parent op id>/<name>". It is derived from the parent op's id, so
// a retry of the parent's call in any form (its op is the same) finds the same steps,
// and a new op under a purged parent's key does not.
func StepKey(parentOpID, name string) string { return StepKeyPrefix + parentOpID + "/" + name }

// CompensationKey is the key of the op that compensates step name of parentOpID:
// "~step/<parent op id>/undo.<name>" ('.' is not a step name's).
func CompensationKey(parentOpID, name string) string { return StepKey(parentOpID, "undo."+name) }

// CheckSteps returns why a composite tool's steps cannot be run, or nil.
func CheckSteps(steps []Step) error {
	seen := map[string]bool{}
	for i, s := range steps {
		switch {
		case !stepName.MatchString(s.Name):
			return fmt.Errorf("step %d: name %q is not 1 to 40 lower-case letters, digits and '_', starting with a letter", i, s.Name)
		case seen[s.Name]:
			return fmt.Errorf("step %q is named twice", s.Name)
		case s.Tool == "":
			return fmt.Errorf("step %q names no tool", s.Name)
		case s.When != "" && !strings.HasPrefix(s.When, "/"):
			return fmt.Errorf("step %q: when %q is not a JSON pointer (it starts with /)", s.Name, s.When)
		case s.Compensate != nil && s.Compensate.Tool == "":
			return fmt.Errorf("step %q: compensate names no tool", s.Name)
		}
		for _, a := range []json.RawMessage{s.Args, compensateArgs(s)} {
			if len(a) > 0 && !isObject(a) {
				return fmt.Errorf("step %q: args must be a JSON object", s.Name)
			}
		}
		seen[s.Name] = true
	}
	if len(steps) == 0 {
		return fmt.Errorf("declares no step")
	}
	return nil
}

func compensateArgs(s Step) json.RawMessage {
	if s.Compensate == nil {
		return nil
	}
	return s.Compensate.Args
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// fillArgs builds a step's arguments from its template and doc (see Step.Args).
func fillArgs(template json.RawMessage, doc any) (json.RawMessage, error) {
	if len(template) == 0 {
		return json.RawMessage("{}"), nil
	}
	var t any
	if err := json.Unmarshal(template, &t); err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	v, err := fill(t, doc, "args")
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// fill replaces every {"$from": pointer} in v by what the pointer names in doc.
func fill(v, doc any, at string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if p, ok := x["$from"].(string); ok && len(x) == 1 {
			got, found := pointer(doc, p)
			if !found {
				return nil, fmt.Errorf("%s: $from %q names nothing", at, p)
			}
			return got, nil
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			f, err := fill(e, doc, at+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = f
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			f, err := fill(e, doc, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			out[i] = f
		}
		return out, nil
	}
	return v, nil
}

// pointer resolves the JSON pointer p (RFC 6901) in doc.
func pointer(doc any, p string) (any, bool) {
	if p == "" {
		return doc, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// truthy says whether a when pointer lets its step run: it names a value other than
// null and false.
func truthy(doc any, p string) bool {
	v, ok := pointer(doc, p)
	return ok && v != nil && v != false
}
