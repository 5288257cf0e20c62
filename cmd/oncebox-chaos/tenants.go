package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// The Stripe Connect accounts of the run's tenants, on the fake Stripe (letters and
// digits after acct_, as Stripe's ids and `oncebox tenant vendor set` want), and the
// name the verdict gives the platform's own objects (no Stripe-Account).
const (
	accountA        = "acct_chaosA"
	accountB        = "acct_chaosB"
	platformAccount = "platform"
)

// chaosTenant is one tenant of the run.
type chaosTenant struct {
	// name is the tenant's name; label is its short name in findings ("a", "b").
	name, label string
	id          int64
	// token is the tenant's agent token.
	token string
	// account is the Stripe Connect account its ops act on; platformAccount when the
	// tenant has none (a rolling upgrade: the previous release knows no accounts).
	account string
}

// createTenants creates the run's tenants with bin (the binary that migrated: this
// tree's refuses the previous release's schema), each with its agent token, and
// points each at its own Connect account with this tree's `oncebox tenant vendor set`.
// A rolling upgrade runs one tenant on the platform's account: the previous release
// has no `tenant vendor` and no migration 024, and its processes would run on the
// platform the ops a process of this tree accepted under an account.
func (h *harness) createTenants(ctx context.Context, bin string) error {
	accounts := []string{accountA, accountB}
	if h.cfg.UpgradeFrom != "" {
		accounts = []string{platformAccount}
	}
	stamp := h.runID + "-" + strconv.FormatInt(time.Now().Unix(), 36)
	for i, acct := range accounts {
		label := string(rune('a' + i))
		t := chaosTenant{name: "chaos-" + stamp + "-" + label, label: label, account: acct}
		out, err := h.onceboxBin(ctx, bin, "tenant", "--database-url", h.dbURL, "create", t.name)
		if err != nil {
			return fmt.Errorf("oncebox tenant create %s: %w\n%s", t.name, err, out)
		}
		t.token = strings.TrimSpace(string(out))
		if err := h.pool.QueryRow(ctx, qTenantID, t.name).Scan(&t.id); err != nil {
			return fmt.Errorf("find tenant %s: %w", t.name, err)
		}
		if acct != platformAccount {
			out, err := h.oncebox(ctx, "tenant", "vendor", "set", "--database-url", h.dbURL, "--tenant", t.name, "stripe", "--account", acct)
			if err != nil {
				return fmt.Errorf("oncebox tenant vendor set --tenant %s stripe --account %s: %w\n%s", t.name, acct, err, out)
			}
		}
		h.tenants = append(h.tenants, t)
		h.logger.Info("tenant created", slog.String("tenant", t.name), slog.String("stripe_account", acct))
	}
	return nil
}

// tenantIDs are the ids of the run's tenants, for the queries.
func (h *harness) tenantIDs() []int64 {
	ids := make([]int64, len(h.tenants))
	for i, t := range h.tenants {
		ids[i] = t.id
	}
	return ids
}

// accountTenants maps each tenant's account to the tenant's label, for the verdict.
func (h *harness) accountTenants() map[string]string {
	out := make(map[string]string, len(h.tenants))
	for _, t := range h.tenants {
		out[t.account] = t.label
	}
	return out
}

// tenantOf returns the tenant the workload sends item i to: alternately, but the
// upstream MCP tools' ops (mcp, mcpio, the gated tool) and the composite ones all go
// to the first tenant, whose approver decides the gated ones.
func (h *harness) tenantOf(i int, tool string) int {
	switch tool {
	case toolMCP, toolMCPStdio, toolGated, toolComposite, toolNoteThenWipe:
		return 0
	}
	return i % len(h.tenants)
}
