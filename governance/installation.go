package governance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/vendorapi"
)

// The kinds of row of the installation's stored policy (migration 029).
const (
	kindApproval = "approval"
	kindBudget   = "budget"
)

// noInstalled is the InstallationVersion of an installation with nothing stored.
const noInstalled = "0:0"

// StoredRule is one of the installation's stored approval rules: the default of its
// tool for every tenant without a rule of its own.
type StoredRule struct {
	Tool      string       `json:"tool"`
	Rule      ApprovalRule `json:"rule"`
	UpdatedAt time.Time    `json:"updated_at"`
	UpdatedBy string       `json:"updated_by"`
}

// Installation is the installation's policy as stored in Postgres: the approval rules
// and budgets every process and the CLI read, which a tenant's own override.
type Installation struct {
	// Rules are the stored approval rules, by tool.
	Rules []StoredRule `json:"rules"`
	// Budgets are the stored budgets, by name (Source SourceDefault).
	Budgets []TenantBudget `json:"budgets"`
	// version names the rows read ("newest version:count").
	version string
}

// rule returns the stored rule of tool.
func (in Installation) rule(tool string) (ApprovalRule, bool) {
	for _, r := range in.Rules {
		if r.Tool == tool {
			return r.Rule, true
		}
	}
	return ApprovalRule{}, false
}

// installedCache remembers the installation's stored policy; like policyCache it is a
// guess the enqueue checks against the version its insert read.
type installedCache struct {
	mu  sync.RWMutex
	cur *Installation
}

func (c *installedCache) get() *Installation {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cur
}

func (c *installedCache) put(in *Installation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur = in
}

// readInstalled reads the installation's stored policy with q (a transaction or the
// pool) and remembers it.
func (g *Governance) readInstalled(ctx context.Context, q queryer) (*Installation, error) {
	rows, err := q.Query(ctx, sqlInstalled)
	if err != nil {
		return nil, fmt.Errorf("governance: read the installation's policy: %w", err)
	}
	defer rows.Close()
	in := &Installation{}
	var newest, n int64
	for rows.Next() {
		var (
			kind, name, by string
			raw            []byte
			version        int64
			at             time.Time
		)
		if err := rows.Scan(&kind, &name, &raw, &version, &at, &by); err != nil {
			return nil, fmt.Errorf("governance: read the installation's policy: %w", err)
		}
		newest, n = max(newest, version), n+1
		if err := in.add(kind, name, raw, at, by); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("governance: read the installation's policy: %w", err)
	}
	in.version = fmt.Sprintf("%d:%d", newest, n)
	g.installed.put(in)
	return in, nil
}

// add decodes one stored row into in.
func (in *Installation) add(kind, name string, raw []byte, at time.Time, by string) error {
	switch kind {
	case kindApproval:
		r := StoredRule{Tool: name, UpdatedAt: at, UpdatedBy: by}
		if err := json.Unmarshal(raw, &r.Rule); err != nil {
			return fmt.Errorf("governance: the installation's approval rule of %s: %w", name, err)
		}
		in.Rules = append(in.Rules, r)
	case kindBudget:
		tb := TenantBudget{Source: SourceDefault, UpdatedAt: at, UpdatedBy: by}
		if err := json.Unmarshal(raw, &tb.Budget); err != nil {
			return fmt.Errorf("governance: the installation's budget %s: %w", name, err)
		}
		in.Budgets = append(in.Budgets, tb)
	}
	return nil
}

// installedAt returns the installation's stored policy whose version is version, as the
// enqueue's insert read it: the one this process remembers when it has that version,
// else the one read with q ("" version: always read).
func (g *Governance) installedAt(ctx context.Context, q queryer, version string) (*Installation, error) {
	if version == noInstalled {
		return &Installation{version: noInstalled}, nil
	}
	if in := g.installed.get(); in != nil && version != "" && in.version == version {
		return in, nil
	}
	return g.readInstalled(ctx, q)
}

// Installation returns the installation's stored approval rules and budgets.
func (g *Governance) Installation(ctx context.Context) (Installation, error) {
	in, err := g.readInstalled(ctx, g.cfg.Pool)
	if err != nil {
		return Installation{}, err
	}
	return *in, nil
}

// toolNamePattern is what a tool may be called (the catalog's rule, vendors/catalog):
// a budget or rule may name a tool of a catalog or an upstream that this process has
// not loaded, so a well-formed name is accepted.
var toolNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)*$`)

// checkToolName accepts a tool this process knows, or any well-formed tool name.
func (g *Governance) checkToolName(field, tool string) error {
	if _, ok := g.cfg.Tools.Lookup(tool); ok {
		return nil
	}
	if len(tool) > 64 || !toolNamePattern.MatchString(tool) {
		return &vendorapi.ValidationError{Field: field, Message: fmt.Sprintf(
			"%q is not a tool name: want lower-case dotted words such as stripe.refund or ledger.post", tool)}
	}
	return nil
}

// SetDefaultRule stores the installation's approval rule of a tool: the default for
// every tenant without a rule of its own, in every process from its next op. by says
// who set it. Ops waiting under the previous rule can no longer be approved.
func (g *Governance) SetDefaultRule(ctx context.Context, tool string, rule ApprovalRule, by string) (EffectiveRule, error) {
	if err := g.checkToolName("tool", tool); err != nil {
		return EffectiveRule{}, err
	}
	if err := rule.Validate(); err != nil {
		return EffectiveRule{}, &vendorapi.ValidationError{Field: "rule", Message: err.Error()}
	}
	if err := g.storeInstalled(ctx, sqlSetInstalled, kindApproval, tool, rule, by); err != nil {
		return EffectiveRule{}, err
	}
	return EffectiveRule{Tool: tool, Rule: rule, Source: SourceDefault, Version: "default:" + rule.version()}, nil
}

// SetDefaultBudget stores the installation's budget b (replacing its budget of that
// name): the default for every tenant without its own of that name.
func (g *Governance) SetDefaultBudget(ctx context.Context, b Budget, by string) error {
	if err := b.Validate(); err != nil {
		return &vendorapi.ValidationError{Field: "budget", Message: err.Error()}
	}
	if b.Tool != "" {
		if err := g.checkToolName("tool", b.Tool); err != nil {
			return err
		}
	}
	return g.storeInstalled(ctx, sqlSetInstalled, kindBudget, b.Name, b, by)
}

// storeInstalled writes one row of the installation's policy with stmt.
func (g *Governance) storeInstalled(ctx context.Context, stmt, kind, name string, body any, by string) error {
	if by == "" {
		return &vendorapi.ValidationError{Field: "by", Message: "say who sets the installation's policy"}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("governance: marshal %s %s: %w", kind, name, err)
	}
	if _, err := g.cfg.Pool.Exec(ctx, stmt, kind, name, raw, by); err != nil {
		return fmt.Errorf("governance: store the installation's %s %s: %w", kind, name, err)
	}
	return nil
}

// ClearDefaultRule removes the installation's stored rule of a tool; it returns an
// error wrapping outbox.ErrNotFound when none is stored.
func (g *Governance) ClearDefaultRule(ctx context.Context, tool string) error {
	return g.deleteInstalled(ctx, kindApproval, tool)
}

// DeleteDefaultBudget removes the installation's stored budget name; it returns an
// error wrapping outbox.ErrNotFound when none is stored.
func (g *Governance) DeleteDefaultBudget(ctx context.Context, name string) error {
	return g.deleteInstalled(ctx, kindBudget, name)
}

func (g *Governance) deleteInstalled(ctx context.Context, kind, name string) error {
	tag, err := g.cfg.Pool.Exec(ctx, sqlDeleteInstalled, kind, name)
	if err != nil {
		return fmt.Errorf("governance: delete the installation's %s %s: %w", kind, name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("governance: the installation stores no %s named %q: %w", kind, name, outbox.ErrNotFound)
	}
	return nil
}

// Seed is what a process's flags say the installation's policy is: it only seeds the
// stored policy (SeedInstallation).
type Seed struct {
	// Approvals are the flags' approval rules, by tool.
	Approvals ApprovalPolicy
	// Budgets are the flags' budgets.
	Budgets []Budget
	// By names the seed in the stored rows, such as "seed: serve flags on host h".
	By string
}

// SeedKept is a seeded rule or budget that the stored policy already has, differently:
// the stored one stays in force.
type SeedKept struct {
	// Kind is "approval" or "budget"; Name the tool or the budget's name.
	Kind, Name string
	// Stored and Seeded are the two, as JSON.
	Stored, Seeded json.RawMessage
	// UpdatedBy says who stored the one in force.
	UpdatedBy string
}

// SeedResult says what SeedInstallation did.
type SeedResult struct {
	// Stored names the rules and budgets the seed stored ("approval stripe.refund").
	Stored []string
	// Kept are those whose stored form differs from the seed's and stays in force.
	Kept []SeedKept
}

// SeedInstallation stores each rule and budget of s that the installation does not
// store yet under its tool or name; those it stores already stay as they are, and the
// result says which differ from the seed. Flags thus set the policy of a new
// installation, and every later change is made where every process reads it (`oncebox
// policy`), not by restarting one process with other flags.
func (g *Governance) SeedInstallation(ctx context.Context, s Seed) (SeedResult, error) {
	var res SeedResult
	tools := make([]string, 0, len(s.Approvals))
	for tool := range s.Approvals {
		tools = append(tools, tool)
	}
	sort.Strings(tools)
	for _, tool := range tools {
		if err := g.seedOne(ctx, &res, kindApproval, tool, s.Approvals[tool], s.By); err != nil {
			return res, err
		}
	}
	for _, b := range s.Budgets {
		if err := g.seedOne(ctx, &res, kindBudget, b.Name, b, s.By); err != nil {
			return res, err
		}
	}
	return res, nil
}

// seedOne stores body under kind and name unless a row is stored there, and records in
// res what it did.
func (g *Governance) seedOne(ctx context.Context, res *SeedResult, kind, name string, body any, by string) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("governance: marshal %s %s: %w", kind, name, err)
	}
	var (
		inserted bool
		stored   []byte
		storedBy string
	)
	err = g.cfg.Pool.QueryRow(ctx, sqlSeedInstalled, kind, name, raw, by).Scan(&inserted, &stored, &storedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		// Another process stored it after this statement's snapshot: read it again.
		err = g.cfg.Pool.QueryRow(ctx, sqlSeedInstalled, kind, name, raw, by).Scan(&inserted, &stored, &storedBy)
	}
	if err != nil {
		return fmt.Errorf("governance: seed the installation's %s %s: %w", kind, name, err)
	}
	if inserted {
		res.Stored = append(res.Stored, kind+" "+name)
		return nil
	}
	if !sameJSON(kind, stored, raw) {
		res.Kept = append(res.Kept, SeedKept{Kind: kind, Name: name, Stored: stored, Seeded: raw, UpdatedBy: storedBy})
	}
	return nil
}

// sameJSON says whether two stored bodies of kind say the same.
func sameJSON(kind string, a, b []byte) bool {
	if kind == kindApproval {
		var x, y ApprovalRule
		if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
			return false
		}
		return x.version() == y.version()
	}
	var x, y Budget
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// dbReader is what a pool and a transaction have in common for reads.
type dbReader interface {
	querier
	queryer
}
