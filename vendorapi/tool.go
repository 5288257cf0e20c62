package vendorapi

import (
	"context"
	"encoding/json"
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
	// derived from the op's id (steps.Key). The steps are stored with each op as its
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
