package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"
)

// DefaultTTL is how long an op is kept when its tool sets no TTL.
const DefaultTTL = 72 * time.Hour

// Tool describes one tool an agent may call: which vendor dispatches it, how its
// arguments are checked before anything is stored, and how long its ops are kept.
type Tool struct {
	// Name is the tool's public name, such as "stripe.payment_intent".
	Name string
	// Vendor is the name of the Vendor that dispatches the tool's ops.
	Vendor string
	// Validate checks the arguments and returns a *ValidationError naming the field.
	// It runs before anything is stored. Required.
	Validate func(args json.RawMessage) error
	// NeedsApproval, when set, says whether an op must wait for a person's approval
	// (for example a refund above an amount) when no approval policy names the tool
	// (the Gate's: governance.Config.Approvals, SetTenantRule). Defaults to never.
	NeedsApproval func(args json.RawMessage) bool
	// Amount, when set, returns the op's amount in minor units and its currency (lower
	// case; "" when the arguments do not say), or ok false when the op has no amount
	// (a full refund). Approval policies "above" an amount and amount budgets use it.
	Amount func(args json.RawMessage) (amount int64, currency string, ok bool)
	// Price, when set, returns the amount an op whose arguments carry none (Amount's ok
	// false: a full refund) will move, and its currency: a refund without an amount
	// refunds what remains of its payment, so a budget counts it at that. It runs
	// before the op is admitted, only when an amount budget covers the op, and may ask
	// the vendor: Enqueue asks it before its transaction, an EnqueueTx inside the
	// caller's, bounded by Config.AdmissionReadTimeout (ErrAdmissionReadDeferred says
	// how a Gate passes such a read on). An error means the amount cannot be known: the op then waits for a
	// person's approval (it is never counted as 0). ctx carries the new op's vendor
	// account (AccountFrom). Defaults to none: such an op waits.
	Price func(ctx context.Context, args json.RawMessage) (amount int64, currency string, err error)
	// RefundOf, when set, names the top-level argument that holds the vendor ref of the
	// payment an op of the tool gives money back from ("payment_intent" for
	// stripe.refund), whose arguments name no currency: the payment is the same tenant's
	// op with that vendor ref, and what it refunded so far the tenant's succeeded ops of
	// this tool that name it (Outbox.PaymentOf). Approval cards and notifications show a
	// refund against its payment. Defaults to none.
	RefundOf string
	// RefAliases names the top-level members of an op's stored result that hold other
	// vendor ids of the op's object, such as a Stripe payment's "latest_charge" (its
	// charge, ch_…): support's lookup (Find) finds the op by them, and the refunds that
	// name them are its refunds (Related). Defaults to none.
	RefAliases []string
	// TTL is how long the tool's ops are kept. Defaults to DefaultTTL.
	TTL time.Duration
	// Redact, when set, returns the form of the arguments to keep once the op is
	// settled (fields dropped or replaced by hashes). The fingerprint is always computed
	// on the full arguments. Defaults to keeping them as they are.
	Redact func(args json.RawMessage) json.RawMessage
	// RedactResult, when set, does the same for the stored result.
	RedactResult func(result json.RawMessage) json.RawMessage
	// Definition, when set, is stored with each op of the tool as it is when the op is
	// accepted, and handed back to the vendor in DispatchParams.Definition: a tool whose
	// definition can change while the process runs (Registry.Replace), such as a tool
	// catalog's, dispatches an op as it was defined when the op was accepted. JSON,
	// opaque to the outbox. Optional.
	Definition json.RawMessage
	// Identity names the top-level arguments that identify an op of the tool, such as
	// amount, currency and customer for a payment: two calls that agree on them are the
	// same operation even when their other arguments (a description, a mail's wording)
	// differ. It widens what counts as the same only for keys oncebox mints itself (MCP
	// calls without a tool call id, within the tool's dedupe window; see
	// IdentityFingerprint and EnqueueParams.ByIdentity); a caller's own key is still
	// guarded by the fingerprint of the whole payload. Defaults to none: every
	// argument identifies the op.
	Identity []string
	// Objects names the arguments that name an object already at the tool's vendor,
	// such as the payment a refund acts on. An op is admitted only if each such object
	// is the tenant's: made by one of its ops (the op's vendor reference), adopted by it
	// (`oncebox tenant adopt`), or tagged by the vendor with one of its ops
	// (ObjectArg.Tag); otherwise the call is refused with a *NotOwnedError and nothing
	// is recorded. Defaults to none: the tool acts on no existing object.
	Objects []ObjectArg
	// Tenant, when set, is the only tenant that may call the tool (a tool of that
	// tenant's own catalog): to every other tenant the tool does not exist, and
	// enqueueing it is refused with the same *UnknownToolError as a name no tool has,
	// which does not list it. Defaults to 0: every tenant may call it.
	Tenant int64
	// Steps, when set, makes the tool a composite one (docs/steps.md): its Vendor must be
	// StepsVendor, and an op of it runs each step as an op of its own, under a key
	// derived from the op's id (StepKey). The steps are stored with each op as its
	// Definition, so an op runs the steps it was accepted with. Defaults to none.
	Steps []Step
}

// ObjectArg names a top-level argument of a tool that names an existing object at the
// tool's vendor (Tool.Objects).
type ObjectArg struct {
	// Arg is the argument, such as "payment_intent". Its value is the object's id: a
	// string, or an integer. Required.
	Arg string
	// Tag, when set, asks the vendor which op the object is tagged with (the TagKey
	// the adapter sets on what it makes): the op id, or "" when the object has no tag or
	// does not exist. It is asked only when the tenant's ops and adoptions do not name
	// the object, so that an op whose object was made but whose answer was lost (still
	// unknown, without a vendor reference) is the tenant's too. An error means the
	// vendor could not be asked: the call is refused with an *ObjectUnavailableError,
	// and may be sent again. ctx carries the new op's vendor account (AccountFrom).
	// Defaults to none: only ops and adoptions count.
	Tag func(ctx context.Context, id string) (opID string, err error)
}

// definition is the JSON stored with an op, nil (SQL NULL) when the tool sets none.
func (t Tool) definition() []byte {
	if len(t.Definition) == 0 {
		return nil
	}
	return t.Definition
}

// Registry is the set of tools an Outbox accepts. Replace swaps the whole set at once:
// each lookup sees either the old set or the new one.
type Registry struct {
	tools atomic.Pointer[map[string]Tool]
}

// NewRegistry builds a registry and checks every tool's definition.
func NewRegistry(tools ...Tool) (*Registry, error) {
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
func (r *Registry) Replace(tools ...Tool) error {
	m := make(map[string]Tool, len(tools))
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
			t.TTL = DefaultTTL
		}
		m[t.Name] = t
	}
	r.tools.Store(&m)
	return nil
}

// set is the set of tools in force.
func (r *Registry) set() map[string]Tool { return *r.tools.Load() }

// Lookup returns the tool with the given name.
func (r *Registry) Lookup(name string) (Tool, bool) {
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
func (r *Registry) Validate(name string, args json.RawMessage) (Tool, error) {
	return r.ValidateFor(0, name, args)
}

// ValidateFor is Validate for a call of the tenant tenantID: another tenant's tool
// (Tool.Tenant) is unknown to it, and the error's Known lists only the tools it may
// call. tenantID 0 is any caller: every tool is known.
func (r *Registry) ValidateFor(tenantID int64, name string, args json.RawMessage) (Tool, error) {
	t, ok := r.set()[name]
	if ok && tenantID != 0 && t.Tenant != 0 && t.Tenant != tenantID {
		ok = false
	}
	if !ok {
		known := r.Names()
		if tenantID != 0 {
			known = r.NamesFor(tenantID)
		}
		return Tool{}, &UnknownToolError{Name: name, Known: known}
	}
	if err := t.Validate(args); err != nil {
		return Tool{}, err
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
func checkObjects(objects []ObjectArg) error {
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
func checkComposite(t *Tool) error {
	if (len(t.Steps) > 0) != (t.Vendor == StepsVendor) {
		return fmt.Errorf("a tool with Steps has the Vendor %q, and only such a tool", StepsVendor)
	}
	if len(t.Steps) == 0 {
		return nil
	}
	if err := CheckSteps(t.Steps); err != nil {
		return fmt.Errorf("Steps: %w", err)
	}
	def, err := json.Marshal(t.Steps)
	if err != nil {
		return err
	}
	t.Definition = def
	return nil
}
