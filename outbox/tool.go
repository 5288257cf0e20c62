package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/oncebox/oncebox/vendorapi"
)

// toolDefinition is the JSON stored with an op of t, nil (SQL NULL) when the tool sets
// none.
func toolDefinition(t vendorapi.Tool) []byte {
	if len(t.Definition) == 0 {
		return nil
	}
	return t.Definition
}

// Registry is the set of tools an Outbox accepts. Replace swaps the whole set at once:
// each lookup sees either the old set or the new one.
type Registry struct {
	tools atomic.Pointer[map[string]vendorapi.Tool]
}

// NewRegistry builds a registry and checks every tool's definition.
func NewRegistry(tools ...vendorapi.Tool) (*Registry, error) {
	r := &Registry{}
	if err := r.Replace(tools...); err != nil {
		return nil, err
	}
	return r, nil
}

// Replace checks tools as NewRegistry does and, when they pass, makes them the
// registry's whole set; on an error the set in force stays. Ops already accepted keep
// their tool's Definition; anything else of a tool (validation, approval, TTL) applies
// to the ops accepted after the swap.
func (r *Registry) Replace(tools ...vendorapi.Tool) error {
	m := make(map[string]vendorapi.Tool, len(tools))
	for _, t := range tools {
		if t.Name == "" || t.Vendor == "" || t.Validate == nil {
			return fmt.Errorf("tool %q: Name, Vendor and Validate are required", t.Name)
		}
		if _, dup := m[t.Name]; dup {
			return fmt.Errorf("tool %q registered twice", t.Name)
		}
		if len(t.Definition) > 0 && !json.Valid(t.Definition) {
			return fmt.Errorf("tool %q: Definition is not valid JSON", t.Name)
		}
		if err := checkIdentity(t.Identity); err != nil {
			return fmt.Errorf("tool %q: Identity %w", t.Name, err)
		}
		if err := checkObjects(t.Objects); err != nil {
			return fmt.Errorf("tool %q: Objects %w", t.Name, err)
		}
		if err := checkComposite(&t); err != nil {
			return fmt.Errorf("tool %q: %w", t.Name, err)
		}
		if t.TTL <= 0 {
			t.TTL = vendorapi.DefaultTTL
		}
		m[t.Name] = t
	}
	r.tools.Store(&m)
	return nil
}

// set is the set of tools in force.
func (r *Registry) set() map[string]vendorapi.Tool { return *r.tools.Load() }

// Lookup returns the tool with the given name.
func (r *Registry) Lookup(name string) (vendorapi.Tool, bool) {
	t, ok := r.set()[name]
	return t, ok
}

// Names returns the registered tool names, sorted.
func (r *Registry) Names() []string {
	set := r.set()
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NamesFor returns, sorted, the names of the tools the tenant tenantID may call:
// those of every tenant (Tool.Tenant 0) and its own.
func (r *Registry) NamesFor(tenantID int64) []string {
	var names []string
	for n, t := range r.set() {
		if t.Tenant == 0 || t.Tenant == tenantID {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Validate checks a tool call against the registry: the tool must exist and its
// arguments must pass its validation. It returns the tool.
func (r *Registry) Validate(name string, args json.RawMessage) (vendorapi.Tool, error) {
	return r.ValidateFor(0, name, args)
}

// ValidateFor is Validate for a call of the tenant tenantID: another tenant's tool
// (Tool.Tenant) is unknown to it, and the error's Known lists only the tools it may
// call. tenantID 0 is any caller: every tool is known.
func (r *Registry) ValidateFor(tenantID int64, name string, args json.RawMessage) (vendorapi.Tool, error) {
	t, ok := r.set()[name]
	if ok && tenantID != 0 && t.Tenant != 0 && t.Tenant != tenantID {
		ok = false
	}
	if !ok {
		known := r.Names()
		if tenantID != 0 {
			known = r.NamesFor(tenantID)
		}
		return vendorapi.Tool{}, &UnknownToolError{Name: name, Known: known}
	}
	if err := t.Validate(args); err != nil {
		return vendorapi.Tool{}, err
	}
	return t, nil
}

// checkIdentity returns why a tool's Identity cannot be used, or nil.
func checkIdentity(fields []string) error {
	seen := map[string]bool{}
	for _, f := range fields {
		if f == "" {
			return errors.New("names an empty field")
		}
		if seen[f] {
			return fmt.Errorf("names %q twice", f)
		}
		seen[f] = true
	}
	return nil
}

// checkObjects returns why a tool's Objects cannot be used, or nil.
func checkObjects(objects []vendorapi.ObjectArg) error {
	seen := map[string]bool{}
	for _, o := range objects {
		if o.Arg == "" {
			return errors.New("names an empty argument")
		}
		if seen[o.Arg] {
			return fmt.Errorf("names %q twice", o.Arg)
		}
		seen[o.Arg] = true
	}
	return nil
}

// checkComposite checks a composite tool's steps and stores them as its Definition.
func checkComposite(t *vendorapi.Tool) error {
	if (len(t.Steps) > 0) != (t.Vendor == vendorapi.StepsVendor) {
		return fmt.Errorf("a tool with Steps has the Vendor %q, and only such a tool", vendorapi.StepsVendor)
	}
	if len(t.Steps) == 0 {
		return nil
	}
	if err := vendorapi.CheckSteps(t.Steps); err != nil {
		return fmt.Errorf("Steps: %w", err)
	}
	def, err := json.Marshal(t.Steps)
	if err != nil {
		return err
	}
	t.Definition = def
	return nil
}
