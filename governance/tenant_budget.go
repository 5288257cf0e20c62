package governance

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/vendorapi"
)

// queryer is what a pool and a transaction have in common for reads of many rows.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// TenantBudget is a budget in force for a tenant, and where it comes from.
type TenantBudget struct {
	Budget Budget `json:"budget"`
	// Source is SourceTenant for the tenant's own budget (SetTenantBudget), or
	// SourceDefault for the installation's (Config.Budgets).
	Source PolicySource `json:"source"`
	// UpdatedAt and UpdatedBy say when and by whom a tenant's own budget was last set.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	UpdatedBy string    `json:"updated_by,omitempty"`
}

// ownBudgets are a tenant's own budgets as stored, and the version that names them
// (GateOp.BudgetVersion).
type ownBudgets struct {
	version string
	rows    []TenantBudget
}

// budgetCacheMax bounds how many tenants' budgets a process remembers; the cache
// starts over when it is full.
const budgetCacheMax = 10_000

// budgetCache remembers the tenants' own budgets read by enqueues. Like policyCache, a
// remembered set is only a guess: the enqueue's insert reads the stored version in the
// same statement, and a set of another version is read again. A stale entry costs a
// round trip; it never lets an op skip a budget in force.
type budgetCache struct {
	mu      sync.RWMutex
	tenants map[int64]ownBudgets
}

func (c *budgetCache) get(tenantID int64) (ownBudgets, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b, ok := c.tenants[tenantID]
	return b, ok
}

func (c *budgetCache) put(tenantID int64, b ownBudgets) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tenants == nil || len(c.tenants) >= budgetCacheMax {
		c.tenants = make(map[int64]ownBudgets)
	}
	c.tenants[tenantID] = b
}

// noOwnBudgets is the BudgetVersion of a tenant without budgets of its own.
const noOwnBudgets = "0:0"

// readOwnBudgets reads the tenant's own budgets with q (a transaction or the pool) and
// remembers them.
func (g *Governance) readOwnBudgets(ctx context.Context, q queryer, tenantID int64) (ownBudgets, error) {
	rows, err := q.Query(ctx, sqlTenantBudgets, tenantID)
	if err != nil {
		return ownBudgets{}, fmt.Errorf("governance: read tenant budgets: %w", err)
	}
	defer rows.Close()
	var (
		own     ownBudgets
		newest  int64
		version int64
	)
	for rows.Next() {
		var (
			raw []byte
			tb  = TenantBudget{Source: SourceTenant}
		)
		if err := rows.Scan(&raw, &version, &tb.UpdatedAt, &tb.UpdatedBy); err != nil {
			return ownBudgets{}, fmt.Errorf("governance: read tenant budgets: %w", err)
		}
		if err := json.Unmarshal(raw, &tb.Budget); err != nil {
			return ownBudgets{}, fmt.Errorf("governance: tenant %d's budget: %w", tenantID, err)
		}
		newest = max(newest, version)
		own.rows = append(own.rows, tb)
	}
	if err := rows.Err(); err != nil {
		return ownBudgets{}, fmt.Errorf("governance: read tenant budgets: %w", err)
	}
	own.version = fmt.Sprintf("%d:%d", newest, len(own.rows))
	g.budgets.put(tenantID, own)
	return own, nil
}

// ownBudgetsAt returns the tenant's own budgets whose stored version is version, as the
// enqueue's insert read it: the ones this process remembers when they have that
// version, else the ones read with q ("" version: always read).
func (g *Governance) ownBudgetsAt(ctx context.Context, q queryer, tenantID int64, version string) (ownBudgets, error) {
	if version == noOwnBudgets {
		return ownBudgets{version: noOwnBudgets}, nil
	}
	if own, ok := g.budgets.get(tenantID); ok && version != "" && own.version == version {
		return own, nil
	}
	return g.readOwnBudgets(ctx, q, tenantID)
}

// inForce is the budgets in force for a tenant with the own budgets own and the
// installation's stored policy in: the installation's stored budgets replace this
// process's defaults (Config.Budgets) of the same name and add to the others; each of
// the tenant's budgets replaces the default of the same name, and the others add to the
// defaults.
func (g *Governance) inForce(own []TenantBudget, in *Installation) []TenantBudget {
	mine := map[string]bool{}
	for _, tb := range own {
		mine[tb.Budget.Name] = true
	}
	stored := map[string]bool{}
	for _, tb := range in.Budgets {
		stored[tb.Budget.Name] = true
	}
	out := make([]TenantBudget, 0, len(g.cfg.Budgets)+len(in.Budgets)+len(own))
	for _, b := range g.cfg.Budgets {
		if !mine[b.Name] && !stored[b.Name] {
			out = append(out, TenantBudget{Budget: b, Source: SourceDefault})
		}
	}
	for _, tb := range in.Budgets {
		if !mine[tb.Budget.Name] {
			out = append(out, tb)
		}
	}
	out = append(out, own...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Budget.Name < out[j].Budget.Name })
	return out
}

// budgetsFor returns the budgets in force for the op's tenant, reading its own with q
// when this process does not remember the version the insert read.
func (g *Governance) budgetsFor(ctx context.Context, q queryer, op outbox.GateOp, in *Installation) ([]Budget, error) {
	own, err := g.ownBudgetsAt(ctx, q, op.Op.TenantID, op.BudgetVersion)
	if err != nil {
		return nil, err
	}
	if len(own.rows) == 0 && len(in.Budgets) == 0 {
		return g.cfg.Budgets, nil
	}
	tbs := g.inForce(own.rows, in)
	out := make([]Budget, len(tbs))
	for i, tb := range tbs {
		out[i] = tb.Budget
	}
	return out, nil
}

// TenantBudgets returns the budgets in force for the tenant, by name: its own and the
// installation's defaults it does not replace.
func (g *Governance) TenantBudgets(ctx context.Context, tenantID int64) ([]TenantBudget, error) {
	own, err := g.readOwnBudgets(ctx, g.cfg.Pool, tenantID)
	if err != nil {
		return nil, err
	}
	in, err := g.readInstalled(ctx, g.cfg.Pool)
	if err != nil {
		return nil, err
	}
	return g.inForce(own.rows, in), nil
}

// SetTenantBudget sets the tenant's own budget b (replacing its budget of that name,
// and the default of that name), recording by as who set it. It applies to the next
// op in every process: the enqueue reads the tenant's budget version with the op's
// insert. What the budget's current window used so far stays counted.
func (g *Governance) SetTenantBudget(ctx context.Context, tenantID int64, b Budget, by string) error {
	if err := b.Validate(); err != nil {
		return &vendorapi.ValidationError{Field: "budget", Message: err.Error()}
	}
	if b.Tool != "" {
		// A catalog or upstream tool of the tenant may be one this process has not
		// loaded (the CLI loads no tenant's catalog): a well-formed name is accepted.
		if err := g.checkToolName("tool", b.Tool); err != nil {
			return err
		}
	}
	if by == "" {
		return &vendorapi.ValidationError{Field: "by", Message: "say who sets the budget"}
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("governance: marshal budget: %w", err)
	}
	if _, err := g.cfg.Pool.Exec(ctx, sqlSetTenantBudget, tenantID, b.Name, raw, by); err != nil {
		return fmt.Errorf("governance: set budget: %w", err)
	}
	return nil
}

// DeleteTenantBudget removes the tenant's own budget name: the default of that name,
// if any, applies again. It returns an error wrapping outbox.ErrNotFound when the
// tenant has no budget of that name.
func (g *Governance) DeleteTenantBudget(ctx context.Context, tenantID int64, name string) error {
	tag, err := g.cfg.Pool.Exec(ctx, sqlDeleteTenantBudget, tenantID, name)
	if err != nil {
		return fmt.Errorf("governance: delete budget: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("governance: the tenant has no budget of its own named %q: %w", name, outbox.ErrNotFound)
	}
	return nil
}

// WaitingByBudget returns, per budget name, how many of the tenant's ops wait for a
// person's approval because they would exceed it.
func (g *Governance) WaitingByBudget(ctx context.Context, tenantID int64) (map[string]int64, error) {
	rows, err := g.cfg.Pool.Query(ctx, sqlWaitingByBudget, tenantID)
	if err != nil {
		return nil, fmt.Errorf("governance: count ops waiting per budget: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			name string
			n    int64
		)
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("governance: count ops waiting per budget: %w", err)
		}
		out[name] = n
	}
	return out, rows.Err()
}
