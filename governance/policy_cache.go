package governance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// tenantRule is a tenant's own approval rule of one tool as stored, or its absence
// (version 0: the tenant has no rule of its own for the tool).
type tenantRule struct {
	rule    ApprovalRule
	version int64
}

// policyCacheMax bounds how many (tenant, tool) rules a process remembers; the cache
// starts over when it is full.
const policyCacheMax = 10_000

// policyCache remembers the tenants' own approval rules read by enqueues, so that an
// enqueue need not read the rule in a round trip of its own. A remembered rule is only
// ever a guess: the enqueue's insert reads the stored version in the same statement
// (outbox.GateOp.PolicyVersion), and a remembered rule of another version is read
// again, once. A stale entry costs a round trip; it never lets an op skip the rule in
// force.
type policyCache struct {
	mu    sync.RWMutex
	rules map[policyCacheKey]tenantRule
}

type policyCacheKey struct {
	tenantID int64
	tool     string
}

func (c *policyCache) get(tenantID int64, tool string) (tenantRule, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r, ok := c.rules[policyCacheKey{tenantID, tool}]
	return r, ok
}

func (c *policyCache) put(tenantID int64, tool string, r tenantRule) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rules == nil || len(c.rules) >= policyCacheMax {
		c.rules = make(map[policyCacheKey]tenantRule)
	}
	c.rules[policyCacheKey{tenantID, tool}] = r
}

func (c *policyCache) forget(tenantID int64, tool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.rules, policyCacheKey{tenantID, tool})
}

// readTenantRule reads the tenant's own rule of a tool with q (a transaction or the
// pool), version 0 when there is none, and remembers it for the next enqueues.
func (g *Governance) readTenantRule(ctx context.Context, q querier, tenantID int64, tool string) (tenantRule, error) {
	var (
		raw []byte
		tr  tenantRule
	)
	err := q.QueryRow(ctx, sqlTenantRule, tenantID, tool).Scan(&raw, &tr.version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		tr = tenantRule{}
	case err != nil:
		return tenantRule{}, fmt.Errorf("governance: read approval rule: %w", err)
	default:
		if err := json.Unmarshal(raw, &tr.rule); err != nil {
			return tenantRule{}, fmt.Errorf("governance: tenant %d's approval rule of %s: %w", tenantID, tool, err)
		}
	}
	g.policies.put(tenantID, tool, tr)
	return tr, nil
}

// tenantRuleAt returns the tenant's own rule of a tool whose stored version is version
// (0: the tenant has none), as the enqueue's insert read it: the one this process
// remembers when it has that version, else the one read with q.
func (g *Governance) tenantRuleAt(ctx context.Context, q querier, tenantID int64, tool string, version int64) (tenantRule, error) {
	if tr, ok := g.policies.get(tenantID, tool); ok && tr.version == version {
		return tr, nil
	}
	if version == 0 {
		g.policies.put(tenantID, tool, tenantRule{})
		return tenantRule{}, nil
	}
	return g.readTenantRule(ctx, q, tenantID, tool)
}
