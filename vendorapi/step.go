package vendorapi

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// StepsVendor is the vendor of composite tools (Tool.Steps): their ops are never
// dispatched; the step runner (a River job of kind "oncebox.steps") runs their steps,
// each an op of its own, and settles them (docs/steps.md).
const StepsVendor = "steps"

// stepName is what a step may be called.
var stepName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// Step is one step of a composite tool: a call of another tool (built-in, catalog or
// upstream, never a composite one), with arguments built from the composite call and
// from earlier steps.
type Step struct {
	// Name names the step, unique in its tool: 1 to 40 lower-case letters, digits and
	// '_', starting with a letter. It derives the step's key (steps.Key).
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
