package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/vendorapi"
)

// Gate decides what becomes of each new op: it runs, it waits for a person, or it is
// refused. The enqueue calls Admit once per new op, inside its transaction, after the
// op's row is inserted (so a replay never reaches the gate) and before its dispatch
// job is. Package governance implements it with approval rules, budgets and tenant
// policies.
type Gate interface {
	// Admit returns the admission of op: the zero Admission admits it; an Admission
	// with Hold makes it wait for a person. An error refuses it: nothing the enqueue
	// wrote stays, and the enqueue returns the error, wrapped (errors.Is and errors.As
	// find it: a typed error the caller maps, such as governance's *BudgetExceededError).
	Admit(ctx context.Context, tx pgx.Tx, op GateOp) (Admission, error)
	// CheckApproval is asked, in the decision's transaction, before a person's approval
	// of an op that waits under policyVersion (Hold.PolicyVersion) is counted. It
	// returns an error wrapping ErrPolicyChanged when the policy in force for the op's
	// tool is no longer that one: the op keeps waiting.
	CheckApproval(ctx context.Context, tx pgx.Tx, op *Op, tool vendorapi.Tool, policyVersion string) error
}

// GateOp is a new op as the gate sees it.
type GateOp struct {
	// Op is the op as inserted, pending.
	Op *Op
	// Tool is the op's tool.
	Tool vendorapi.Tool
	// Args are the op's whole arguments (Op.Args may be their redacted form).
	Args json.RawMessage
	// TokenID is the API token that asked (0: none).
	TokenID int64
	// SessionConversation is true when Op.ConversationID is the MCP session's, not one
	// the client named (EnqueueParams.SessionConversation).
	SessionConversation bool
	// PolicyVersion is the version of the tenant's own approval rule of the tool as
	// stored when the op was inserted (0: the tenant has none), read by the insert
	// itself: a gate that remembers rules compares it with the version it remembers, and
	// reads the rule only when they differ.
	PolicyVersion int64
	// BudgetVersion names the tenant's own budgets as stored when the op was inserted
	// ("newest version:count", "0:0" when it has none), read by the insert itself: a
	// gate that remembers a tenant's budgets reads them again only when it differs.
	BudgetVersion string
	// InstallationVersion names the installation's stored approval rules and budgets
	// (the defaults a tenant's own override) when the op was inserted ("newest
	// version:count", "0:0" when none is stored), read by the insert itself: a gate that
	// remembers them reads them again only when it differs.
	InstallationVersion string
}

// Admission is a gate's answer about a new op: it runs, or it waits for a person (a
// refusal is Admit's error); a person's decision about a held op is a Decision.
type Admission struct {
	// Hold, when set, makes the op wait for a person's approval. Nil admits it.
	Hold *Hold
}

// Hold says why an op waits for a person, and what its approval is bound to.
type Hold struct {
	// Why says in one sentence why the op waits, for the model and the approver.
	Why string
	// PolicyVersion names the policy the op waits under; an approval is checked
	// against it (Gate.CheckApproval).
	PolicyVersion string
	// Approvers is how many distinct approvals release the op (1 when less).
	Approvers int
	// Budget names the budget the op would exceed, when that is why it waits ("":
	// another reason). It is recorded with the approval request.
	Budget string
}

// approvers returns how many distinct approvals the hold needs.
func (h *Hold) approvers() int {
	if h.Approvers < 1 {
		return 1
	}
	return h.Approvers
}

// ToolRulesVersion is the policy version of an op held by ToolRules: its tool's own
// rule. Package governance names the same rule the same way.
const ToolRulesVersion = "tool"

// ToolRules is the Gate of an Outbox configured with none: an op waits for a person
// exactly when its tool's NeedsApproval says so (such as a refund above
// --refund-approval-above), and runs otherwise. It knows no budget and no tenant rule:
// an Outbox that must honour those takes governance's Gate. No Outbox is without a
// gate, so a tool's own approval rule holds however the Outbox was built.
type ToolRules struct{}

// Admit implements Gate.
func (ToolRules) Admit(_ context.Context, _ pgx.Tx, op GateOp) (Admission, error) {
	if op.Tool.NeedsApproval == nil || !op.Tool.NeedsApproval(op.Args) {
		return Admission{}, nil
	}
	return Admission{Hold: &Hold{PolicyVersion: ToolRulesVersion,
		Why: fmt.Sprintf("This %s needs a person's approval (its amount is above the configured threshold, or it has none).", op.Tool.Name)}}, nil
}

// CheckApproval implements Gate: only an op that waits under its tool's own rule may be
// approved here; one held under another policy (a tenant's rule, a budget, set by
// governance) is refused with ErrPolicyChanged, since this gate cannot tell whether that
// policy still holds.
func (ToolRules) CheckApproval(_ context.Context, _ pgx.Tx, op *Op, tool vendorapi.Tool, policyVersion string) error {
	if policyVersion == ToolRulesVersion && tool.NeedsApproval != nil {
		return nil
	}
	return fmt.Errorf("%w: it waits under %s, and this Outbox applies only its tool's own rule", ErrPolicyChanged, policyVersion)
}
