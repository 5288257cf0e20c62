package governance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/internal/money"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/vendorapi"
)

// ApprovalMode says when an op of a tool waits for a person's approval.
type ApprovalMode string

// The approval modes.
const (
	// ApprovalNever dispatches every op of the tool at once.
	ApprovalNever ApprovalMode = "never"
	// ApprovalAlways makes every op of the tool wait.
	ApprovalAlways ApprovalMode = "always"
	// ApprovalAbove makes an op wait when its amount is above the rule's threshold for
	// its currency, or when it has no amount (a full refund): a doubt never skips
	// approval.
	ApprovalAbove ApprovalMode = "above"
)

// AnyCurrency is the key of ApprovalRule.Above that applies to every currency without
// a threshold of its own, and to amounts whose currency is unknown (a refund of a
// payment oncebox did not make).
const AnyCurrency = "*"

// ApprovalRule is the approval policy of one tool.
type ApprovalRule struct {
	Mode ApprovalMode `json:"mode"`
	// Above maps a lower-case currency code, or AnyCurrency, to the amount in minor
	// units above which an op waits (mode above). A refund's currency is its
	// payment's. A currency with no entry and no AnyCurrency entry does not wait; an
	// amount whose currency is unknown then waits.
	Above map[string]int64 `json:"above,omitempty"`
	// Approvers is how many distinct approver tokens must approve an op before it is
	// dispatched: 1 by default, 2 for four eyes. One rejection rejects.
	Approvers int `json:"approvers,omitempty"`
}

// Validate checks a rule.
func (r ApprovalRule) Validate() error {
	switch r.Mode {
	case ApprovalNever, ApprovalAlways:
		if len(r.Above) > 0 {
			return fmt.Errorf("mode %s takes no above thresholds", r.Mode)
		}
	case ApprovalAbove:
		if len(r.Above) == 0 {
			return errors.New(`mode above needs thresholds, such as {"*": 10000} or {"usd": 50000}`)
		}
		for cur, n := range r.Above {
			if cur != AnyCurrency && (len(cur) != 3 || strings.ToLower(cur) != cur) {
				return fmt.Errorf("above: %q is neither a lower-case three-letter currency code nor %q", cur, AnyCurrency)
			}
			if n < 0 {
				return fmt.Errorf("above: the threshold for %s is negative", cur)
			}
		}
	default:
		return fmt.Errorf("mode %q: want never, always or above", r.Mode)
	}
	if r.Approvers < 0 || r.Approvers > 10 {
		return fmt.Errorf("approvers %d: want 1 to 10", r.Approvers)
	}
	return nil
}

// approvers returns how many distinct approvals the rule needs.
func (r ApprovalRule) approvers() int {
	if r.Approvers < 1 {
		return 1
	}
	return r.Approvers
}

// needs says whether an op of tool with args waits under the rule, and why, in one
// sentence meant for the model and the approver. shown returns the currency of an
// amount whose arguments name none (a refund's: its payment's, "" when unknown): the
// threshold compared is that currency's, else the rule's AnyCurrency one. An amount
// whose currency is unknown waits when the rule has thresholds for named currencies
// only: a doubt never skips approval.
func (r ApprovalRule) needs(tool vendorapi.Tool, args json.RawMessage, shown func() string) (bool, string) {
	switch r.Mode {
	case ApprovalAlways:
		return true, fmt.Sprintf("Every %s needs a person's approval.", tool.Name)
	case ApprovalAbove:
		if tool.Amount == nil {
			return true, fmt.Sprintf("A %s needs a person's approval (the tool has no amount to compare).", tool.Name)
		}
		amount, currency, ok := tool.Amount(args)
		if !ok {
			return true, fmt.Sprintf("A %s without an amount (such as a full refund) needs a person's approval.", tool.Name)
		}
		if currency == "" {
			currency = shown()
		}
		limit, found := r.Above[currency] // never found for "": validate refuses an empty currency
		if !found {
			limit, found = r.Above[AnyCurrency]
		}
		if !found && currency == "" && len(r.Above) > 0 {
			return true, fmt.Sprintf("A %s of %s needs a person's approval: oncebox does not know its currency (its payment "+
				"was not made by one of the tenant's ops), and the approval rule has thresholds for named currencies only.",
				tool.Name, formatAmount(amount, currency))
		}
		if found && amount > limit {
			return true, fmt.Sprintf("A %s of %s is above the approval threshold of %s.", tool.Name,
				formatAmount(amount, currency), formatAmount(limit, currency))
		}
	}
	return false, ""
}

// version names the rule's content, so that a decision can tell whether the policy an
// op waits under is still the one in force.
func (r ApprovalRule) version() string {
	keys := make([]string, 0, len(r.Above))
	for k := range r.Above {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%d", r.Mode, r.approvers())
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%d", k, r.Above[k])
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:6])
}

// ApprovalPolicy is a rule per tool name: the process-wide default of Config.Approvals,
// which a tenant's own rules (SetTenantRule) override tool by tool.
type ApprovalPolicy map[string]ApprovalRule

// ParseApprovalPolicy reads a policy written as JSON, such as
// {"stripe.refund": {"mode": "above", "above": {"*": 10000}, "approvers": 2},
// "sendgrid.mail": {"mode": "always"}}. An empty string is no policy.
func ParseApprovalPolicy(s string) (ApprovalPolicy, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var p ApprovalPolicy
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("approval policy: %w", err)
	}
	for tool, r := range p {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("approval policy of %s: %w", tool, err)
		}
	}
	return p, nil
}

// PolicySource says where the rule in force for a tenant's tool comes from.
type PolicySource string

// The sources of a rule.
const (
	// SourceTenant is a rule set for the tenant (SetTenantRule).
	SourceTenant PolicySource = "tenant"
	// SourceDefault is the installation's default: stored (SetDefaultRule, seeded by
	// the flags), else the process's Config.Approvals (a catalog's rules).
	SourceDefault PolicySource = "default"
	// SourceTool is the tool's own NeedsApproval (such as --refund-approval-above).
	SourceTool PolicySource = "tool"
	// SourceNone: nothing makes the tool's ops wait.
	SourceNone PolicySource = "none"
)

// EffectiveRule is the rule in force for one tenant's tool and its version.
type EffectiveRule struct {
	Tool   string       `json:"tool"`
	Rule   ApprovalRule `json:"rule"`
	Source PolicySource `json:"source"`
	// Version changes whenever the rule in force changes; an approval is bound to the
	// version its op started waiting under.
	Version string `json:"version"`
}

// effectiveRule returns the rule in force for the tenant's tool, reading the tenant's
// own rule and the installation's stored ones with q (the decision's transaction, or the
// pool).
func (g *Governance) effectiveRule(ctx context.Context, q dbReader, tenantID int64, tool vendorapi.Tool) (EffectiveRule, error) {
	tr, err := g.readTenantRule(ctx, q, tenantID, tool.Name)
	if err != nil {
		return EffectiveRule{}, err
	}
	in, err := g.readInstalled(ctx, q)
	if err != nil {
		return EffectiveRule{}, err
	}
	return g.ruleInForce(tool, tr, in), nil
}

// ruleInForce is the rule in force for a tool given the tenant's own rule of it (version
// 0: none) and the installation's stored policy in: the tenant's, else the
// installation's stored one, else this process's default (Config.Approvals: a catalog's
// rules), else the tool's own. A default's version is its content's, so that every
// process names the same rule the same way.
func (g *Governance) ruleInForce(tool vendorapi.Tool, tr tenantRule, in *Installation) EffectiveRule {
	if tr.version != 0 {
		return EffectiveRule{Tool: tool.Name, Rule: tr.rule, Source: SourceTenant, Version: "tenant:" + strconv.FormatInt(tr.version, 10)}
	}
	if r, ok := in.rule(tool.Name); ok {
		return EffectiveRule{Tool: tool.Name, Rule: r, Source: SourceDefault, Version: "default:" + r.version()}
	}
	if r, ok := g.cfg.Approvals[tool.Name]; ok {
		return EffectiveRule{Tool: tool.Name, Rule: r, Source: SourceDefault, Version: "default:" + r.version()}
	}
	if tool.NeedsApproval != nil {
		return EffectiveRule{Tool: tool.Name, Rule: ApprovalRule{Mode: ApprovalAbove}, Source: SourceTool, Version: outbox.ToolRulesVersion}
	}
	return EffectiveRule{Tool: tool.Name, Rule: ApprovalRule{Mode: ApprovalNever}, Source: SourceNone, Version: "none"}
}

// needs applies the effective rule to one op's arguments; shown is as for
// ApprovalRule.needs.
func (e EffectiveRule) needs(tool vendorapi.Tool, args json.RawMessage, shown func() string) (bool, string) {
	if e.Source == SourceTool {
		if !tool.NeedsApproval(args) {
			return false, ""
		}
		if tool.Amount != nil {
			if amount, currency, ok := tool.Amount(args); ok {
				if currency == "" {
					currency = shown()
				}
				return true, fmt.Sprintf("This %s of %s needs a person's approval (its amount is above the configured threshold).",
					tool.Name, formatAmount(amount, currency))
			}
		}
		return true, fmt.Sprintf("This %s needs a person's approval (its amount is above the configured threshold, or it has none).", tool.Name)
	}
	return e.Rule.needs(tool, args, shown)
}

// querier is what a pool and a transaction have in common for one-row reads.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// EffectivePolicy returns the rule in force for every registered tool of the tenant,
// and for every tool the installation stores a rule of that this process has not
// loaded (a catalog or upstream tool of another process's configuration).
func (g *Governance) EffectivePolicy(ctx context.Context, tenantID int64) ([]EffectiveRule, error) {
	in, err := g.readInstalled(ctx, g.cfg.Pool)
	if err != nil {
		return nil, err
	}
	names := g.cfg.Tools.NamesFor(tenantID)
	for _, r := range in.Rules {
		if _, ok := g.cfg.Tools.Lookup(r.Tool); !ok {
			names = append(names, r.Tool)
		}
	}
	sort.Strings(names)
	var out []EffectiveRule
	for _, name := range names {
		tool, ok := g.cfg.Tools.Lookup(name)
		if !ok {
			tool = vendorapi.Tool{Name: name}
		}
		tr, err := g.readTenantRule(ctx, g.cfg.Pool, tenantID, name)
		if err != nil {
			return nil, err
		}
		out = append(out, g.ruleInForce(tool, tr, in))
	}
	return out, nil
}

// SetTenantRule sets the tenant's own approval rule of a tool, overriding the default.
// Ops already waiting under the previous rule can no longer be approved (their approval
// was bound to it): they can be rejected, or left to expire.
func (g *Governance) SetTenantRule(ctx context.Context, tenantID int64, tool string, rule ApprovalRule) (EffectiveRule, error) {
	if err := g.checkToolName("tool", tool); err != nil {
		return EffectiveRule{}, err
	}
	if err := rule.Validate(); err != nil {
		return EffectiveRule{}, &vendorapi.ValidationError{Field: "rule", Message: err.Error()}
	}
	raw, err := json.Marshal(rule)
	if err != nil {
		return EffectiveRule{}, fmt.Errorf("governance: marshal rule: %w", err)
	}
	var version int64
	if err := g.cfg.Pool.QueryRow(ctx, sqlSetTenantRule, tenantID, tool, raw).Scan(&version); err != nil {
		return EffectiveRule{}, fmt.Errorf("governance: set approval rule: %w", err)
	}
	g.policies.put(tenantID, tool, tenantRule{rule: rule, version: version})
	return EffectiveRule{Tool: tool, Rule: rule, Source: SourceTenant, Version: "tenant:" + strconv.FormatInt(version, 10)}, nil
}

// ClearTenantRule removes the tenant's own rule of a tool: the default applies again
// (a new version for the ops waiting under the removed rule).
func (g *Governance) ClearTenantRule(ctx context.Context, tenantID int64, tool string) error {
	tag, err := g.cfg.Pool.Exec(ctx, sqlClearTenantRule, tenantID, tool)
	g.policies.forget(tenantID, tool)
	if err != nil {
		return fmt.Errorf("governance: clear approval rule: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("governance: the tenant has no rule of its own for %s: %w", tool, outbox.ErrNotFound)
	}
	return nil
}

// formatAmount spells an amount in minor units as a person reads it, in its currency
// when known (money.Format).
func formatAmount(n int64, currency string) string { return money.Format(n, currency) }
