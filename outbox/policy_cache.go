package outbox

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
// ever a guess: the enqueue's insert compares its version with the stored one in the
// same statement and inserts nothing when they differ (sqlEnqueue), and the enqueue
// then reads the rule in force and starts over. A stale entry costs a round trip; it
// never lets an op skip the rule in force.
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
func (ob *Outbox) readTenantRule(ctx context.Context, q querier, tenantID int64, tool string) (tenantRule, error) {
	var (
		raw []byte
		tr  tenantRule
	)
	err := q.QueryRow(ctx, sqlTenantRule, tenantID, tool).Scan(&raw, &tr.version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		tr = tenantRule{}
	case err != nil:
		return tenantRule{}, fmt.Errorf("outbox: read approval rule: %w", err)
	default:
		if err := json.Unmarshal(raw, &tr.rule); err != nil {
			return tenantRule{}, fmt.Errorf("outbox: tenant %d's approval rule of %s: %w", tenantID, tool, err)
		}
	}
	ob.policies.put(tenantID, tool, tr)
	return tr, nil
}

// cachedTenantRule returns the tenant's own rule of a tool as last read by this
// process, reading it with q when none is remembered. The enqueue's insert checks its
// version (see policyCache).
func (ob *Outbox) cachedTenantRule(ctx context.Context, q querier, tenantID int64, tool string) (tenantRule, error) {
	if tr, ok := ob.policies.get(tenantID, tool); ok {
		return tr, nil
	}
	return ob.readTenantRule(ctx, q, tenantID, tool)
}
