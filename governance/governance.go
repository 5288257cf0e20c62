package governance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/vendorapi"
)

// Config configures a Governance.
type Config struct {
	// Pool holds the tenants' own approval rules and the budgets' usage. Required.
	Pool *pgxpool.Pool
	// Tools are the registered tools, the same registry the Outbox has. Required.
	Tools *outbox.Registry
	// Approvals is this process's default approval policy, per tool, under the
	// installation's stored rules (SetDefaultRule): a stored rule of a tool wins, and a
	// tenant's own rules (SetTenantRule) override both tool by tool. A server passes its
	// catalogs' rules here and stores its flags' with SeedInstallation, so that every
	// process reads the same rule. Defaults to none: a tool's ops wait only when its
	// NeedsApproval says so.
	Approvals ApprovalPolicy
	// Budgets bound what agents do without a person, per tenant (or token, or
	// conversation): this process's defaults, under the installation's stored budgets
	// (SetDefaultBudget) of the same name, which a tenant's own budgets
	// (SetTenantBudget) replace by name and add to. Defaults to none.
	Budgets []Budget
	// Observer counts budget decisions. Defaults to none.
	Observer BudgetObserver
	// Logger receives a warning when an op cannot be priced. Defaults to discarding
	// logs.
	Logger *slog.Logger
}

func (c Config) validate() error {
	if c.Pool == nil {
		return errors.New("governance: Config.Pool is required")
	}
	if c.Tools == nil {
		return errors.New("governance: Config.Tools is required (the Outbox's registry)")
	}
	for tool, r := range c.Approvals {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("governance: approval rule of %s: %w", tool, err)
		}
	}
	for _, b := range c.Budgets {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("governance: %w", err)
		}
	}
	return nil
}

// Governance is the gate of an Outbox (outbox.Config.Gate): it holds for a person the
// ops the approval rule in force says must wait, counts the others against the
// budgets, and holds or refuses those over one.
type Governance struct {
	cfg Config
	// policies remembers the tenants' approval rules (checked against the version the
	// enqueue's insert read).
	policies policyCache
	// budgets remembers the tenants' own budgets (checked against the version the
	// enqueue's insert read).
	budgets budgetCache
	// installed remembers the installation's stored rules and budgets (checked
	// against the version the enqueue's insert read).
	installed installedCache
}

var _ outbox.Gate = (*Governance)(nil)

// New returns the Governance cfg describes.
func New(cfg Config) (*Governance, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Governance{cfg: cfg}, nil
}

// Admit implements outbox.Gate. An op waits when the approval rule in force for its
// tenant's tool says so. Otherwise it is counted against every budget that applies:
// an op that would exceed one waits for approval, or is refused with a
// *BudgetExceededError when the budget says so.
func (g *Governance) Admit(ctx context.Context, tx pgx.Tx, op outbox.GateOp) (outbox.Admission, error) {
	tr, err := g.tenantRuleAt(ctx, tx, op.Op.TenantID, op.Tool.Name, op.PolicyVersion)
	if err != nil {
		return outbox.Admission{}, err
	}
	in, err := g.installedAt(ctx, tx, op.InstallationVersion)
	if err != nil {
		return outbox.Admission{}, err
	}
	rule := g.ruleInForce(op.Tool, tr, in)
	// A refund's payment is read at most once, for the rule and the budgets alike.
	shown := sync.OnceValue(func() string { return g.shownCurrency(ctx, tx, op) })
	if wait, why := rule.needs(op.Tool, op.Args, shown); wait {
		return rule.hold(why), nil
	}
	// Budgets count what runs without a person.
	budgets, err := g.budgetsFor(ctx, tx, op, in)
	if err != nil || len(budgets) == 0 {
		return outbox.Admission{}, err
	}
	_, over, err := g.chargeBudgets(ctx, tx, op, budgets, shown)
	if err != nil || over == nil {
		return outbox.Admission{}, err
	}
	if over.budget.onExceed() == ExceedRefuse && !over.approval {
		return outbox.Admission{}, &BudgetExceededError{Budget: over.budget.Name, Sentence: over.sentence, RetryAfter: over.retryAfter}
	}
	v := rule.hold(over.sentence + " It needs a person's approval.")
	v.Hold.Budget = over.budget.Name
	return v, nil
}

// hold is the admission that makes an op wait under the rule, for why.
func (e EffectiveRule) hold(why string) outbox.Admission {
	return outbox.Admission{Hold: &outbox.Hold{Why: why, PolicyVersion: e.Version, Approvers: e.Rule.approvers()}}
}

// CheckApproval implements outbox.Gate: an approval is bound to the policy version its
// op started waiting under.
func (g *Governance) CheckApproval(ctx context.Context, tx pgx.Tx, op *outbox.Op, tool vendorapi.Tool, policyVersion string) error {
	cur, err := g.effectiveRule(ctx, tx, op.TenantID, tool)
	if err != nil {
		return err
	}
	if cur.Version != policyVersion {
		return fmt.Errorf("%w: it waits under %s, the policy in force is %s", outbox.ErrPolicyChanged, policyVersion, cur.Version)
	}
	return nil
}

// shownCurrency is the currency of an op's amount when its arguments name none: for a
// refund (Tool.RefundOf), its payment's, read from oncebox's own records in the
// enqueue's transaction tx, in lower case; "" for any other op, or when the payment is
// unknown or cannot be read. The approval rule compares the amount with that currency's
// threshold (ApprovalRule.needs), budgets count it in that currency, and the sentence
// writes it in that currency.
func (g *Governance) shownCurrency(ctx context.Context, tx pgx.Tx, op outbox.GateOp) string {
	if op.Tool.RefundOf == "" {
		return ""
	}
	p, err := outbox.LookupPayment(ctx, tx, g.cfg.Tools, op.Op.TenantID, op.Tool.Name, op.Args)
	if err != nil || p == nil || !p.Known {
		return ""
	}
	return strings.ToLower(p.Currency)
}
