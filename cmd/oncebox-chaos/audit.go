package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/audit"
)

// The audit log's check (issue 47, docs/audit.md). Once every op settled, and while the
// serve processes still run (their periodic role seals every 5 s), the run waits until
// the sealer sealed every entry of its tenants; after the processes stopped it hands
// audit.CheckOps every op it knows of (stored, named by an answer, or tagged on a
// vendor's object), with its status as stored ("" for an op the TTL purge took, such as
// the CRM's notes, steps no answer names): each must have one call entry, first, no status change recorded twice,
// its last status its own, and each tenant's chain must verify, after the kills, the
// Postgres restart and crash, and the partitions. Each problem is an AUDIT finding.

const (
	qAuditUnsealed = `SELECT count(*) FROM oncebox_audit WHERE tenant_id = ANY($1) AND hash IS NULL`
	qAuditEntries  = `SELECT count(*) FROM oncebox_audit WHERE tenant_id = ANY($1)`
	qAuditOps      = `SELECT id::text, tenant_id, status, created_at FROM oncebox_op WHERE tenant_id = ANY($1)`
	// qAuditTenantOf finds the tenant of each op of $1 (ids as text) among the tenants $2,
	// from its audit entries: for an op whose row is gone.
	qAuditTenantOf = `SELECT DISTINCT op_id::text, tenant_id FROM oncebox_audit WHERE tenant_id = ANY($2) AND op_id::text = ANY($1::text[])`
)

// sealBound is how long the run waits for the sealer to seal its tenants' entries.
// The sealer seals only entries of transactions older than every one in progress: the
// harness holds none open while it waits.
const sealBound = 60 * time.Second

// auditOp is one op the audit check knows of.
type auditOp struct {
	id     string
	tenant int64
	// status is the op's status as stored; "" when its row is gone (the TTL purge).
	status string
	// created is when its row was created; zero when its row is gone.
	created time.Time
}

// auditScope is which of the ops the run knows of the audit check can judge.
type auditScope struct {
	// since leaves out the ops created before it (zero: none left out).
	since time.Time
	// storedOnly leaves out the ops whose row is gone.
	storedOnly bool
	// none leaves out every op (the chains are still verified).
	none bool
}

// AuditFigures are the audit check's figures on the line.
type AuditFigures struct {
	// Ops are the ops checked, Purged those of them whose row is gone; Skipped those
	// the mode leaves out (auditScope).
	Ops, Purged, Skipped int
	// Entries are the tenants' audit entries; Unsealed those the sealer had not sealed
	// when the wait ended.
	Entries, Unsealed int
}

func (f AuditFigures) String(problems int) string {
	return fmt.Sprintf("audit_ops=%d audit_purged=%d audit_skipped=%d audit_entries=%d audit_unsealed=%d audit_problems=%d",
		f.Ops, f.Purged, f.Skipped, f.Entries, f.Unsealed, problems)
}

// waitSealed waits, at most sealBound, until no entry of the run's tenants is left
// unsealed, and returns how many are left.
func (h *harness) waitSealed(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, sealBound)
	defer cancel()
	t0 := time.Now()
	var n int
	for {
		err := h.pool.QueryRow(ctx, qAuditUnsealed, h.tenantIDs()).Scan(&n)
		if err == nil && n == 0 {
			h.logger.Info("every audit entry sealed", slog.Duration("took", time.Since(t0)))
			return 0
		}
		select {
		case <-ctx.Done():
			h.logger.Warn("audit entries left unsealed", slog.Int("unsealed", n), slog.Duration("waited", time.Since(t0)))
			if err != nil {
				return -1 // not known: the count failed until the end
			}
			return n
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// auditScope is the part of the run's ops the audit check judges. In a rolling upgrade
// only the ops created after this tree's migrate returned: migration 031 creates the
// triggers, and an op created before it has no call entry (the previous release's
// writes after it are recorded; the migration locks oncebox_op, so an op inserted once
// it committed has its entries, and one created after it returned was inserted after).
// The previous release does no TTL purge of the run's ops, and an op without its row has
// no creation time: only stored ops. After an asynchronous failover, only stored ops: an
// op answered to a client and lost at the fork is gone from the new primary with its
// audit entries (they commit with it), which a purged op (entries kept) cannot be told
// apart from; a stored op's row and entries come from the same commits, so it is judged,
// and each tenant's chain, rebuilt by the new primary's sealer from the head it had, is
// verified. A synchronous failover loses no commit a client was answered: it is judged
// whole, as a plain run.
func (h *harness) auditScope() auditScope {
	switch {
	case h.cfg.UpgradeFrom != "":
		at := h.up.migrated.Load()
		return auditScope{since: time.Unix(0, at), storedOnly: true, none: at == 0}
	case h.cfg.Failover == failoverAsync:
		return auditScope{storedOnly: true}
	}
	return auditScope{}
}

// auditWant builds, per tenant, the ops CheckOps judges, with their stored status: the
// stored ops and the ops an answer named whose row is gone, within scope. It returns
// how many ops scope left out.
func auditWant(stored []auditOp, answered map[string]int64, scope auditScope) (map[int64]map[string]string, int) {
	want := map[int64]map[string]string{}
	add := func(op auditOp) {
		if want[op.tenant] == nil {
			want[op.tenant] = map[string]string{}
		}
		want[op.tenant][op.id] = op.status
	}
	skipped := 0
	known := make(map[string]bool, len(stored))
	for _, op := range stored {
		known[op.id] = true
		if scope.none || !op.created.After(scope.since) {
			skipped++
			continue
		}
		add(op)
	}
	for id, tenant := range answered {
		if known[id] {
			continue
		}
		if scope.none || scope.storedOnly {
			skipped++
			continue
		}
		add(auditOp{id: id, tenant: tenant})
	}
	return want, skipped
}

// auditCheck runs audit.CheckOps for each of the run's tenants and returns its problems,
// each named with the tenant, and the figures; unsealed is what waitSealed left, tagged
// the op ids the vendors' objects carry.
func (h *harness) auditCheck(ctx context.Context, unsealed int, tagged []string) ([]string, AuditFigures, error) {
	fig := AuditFigures{Unsealed: unsealed}
	rows, err := h.pool.Query(ctx, qAuditOps, h.tenantIDs())
	if err != nil {
		return nil, fig, fmt.Errorf("read the ops for the audit check: %w", err)
	}
	stored, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (auditOp, error) {
		var op auditOp
		err := r.Scan(&op.id, &op.tenant, &op.status, &op.created)
		return op, err
	})
	if err != nil {
		return nil, fig, fmt.Errorf("read the ops for the audit check: %w", err)
	}
	if err := h.pool.QueryRow(ctx, qAuditEntries, h.tenantIDs()).Scan(&fig.Entries); err != nil {
		return nil, fig, fmt.Errorf("count the audit entries: %w", err)
	}
	scope := h.auditScope()
	gone, untraced, err := h.goneOps(ctx, stored, tagged, scope)
	if err != nil {
		return nil, fig, err
	}
	want, skipped := auditWant(stored, gone, scope)
	fig.Skipped = skipped
	var problems []string
	if unsealed != 0 {
		problems = append(problems, fmt.Sprintf("%d audit entries of the run's tenants were not sealed %s after the ops settled (-1: not counted): the sealer of the serve processes' periodic role fell behind or stopped", unsealed, sealBound))
	}
	for _, id := range untraced {
		problems = append(problems, fmt.Sprintf("op %s: a vendor's object carries it, it has no row, and no audit entry of the run's tenants names it", id))
	}
	for _, t := range h.tenants {
		fig.Ops += len(want[t.id])
		for _, status := range want[t.id] {
			if status == "" {
				fig.Purged++
			}
		}
		ps, err := audit.CheckOps(ctx, h.pool, t.id, want[t.id])
		if err != nil {
			return nil, fig, fmt.Errorf("check tenant %s's audit log: %w", t.label, err)
		}
		slices.Sort(ps)
		for _, p := range ps {
			problems = append(problems, "tenant "+t.label+": "+p)
		}
	}
	return problems, fig, nil
}

// goneOps maps to its tenant each op of the run whose row is gone: those an answer named,
// and those a vendor's object is tagged with (a purged step's op, which no answer names),
// whose tenant is the one whose audit entries name it; untraced are those of the latter
// that no entry names. Nothing when scope judges only stored ops.
func (h *harness) goneOps(ctx context.Context, stored []auditOp, tagged []string, scope auditScope) (map[string]int64, []string, error) {
	gone := h.answeredOps()
	if scope.storedOnly || scope.none {
		return gone, nil, nil // auditWant leaves them out
	}
	known := make(map[string]bool, len(stored)+len(gone))
	for _, op := range stored {
		known[op.id] = true
	}
	for id := range gone {
		known[id] = true
	}
	var ask []string
	for _, id := range tagged {
		if id != "" && !known[id] {
			known[id] = true
			ask = append(ask, id)
		}
	}
	if len(ask) == 0 {
		return gone, nil, nil
	}
	rows, err := h.pool.Query(ctx, qAuditTenantOf, ask, h.tenantIDs())
	if err != nil {
		return nil, nil, fmt.Errorf("find the tenants of the purged ops: %w", err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (auditOp, error) {
		var op auditOp
		err := r.Scan(&op.id, &op.tenant)
		return op, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("find the tenants of the purged ops: %w", err)
	}
	traced := map[string]bool{}
	for _, op := range found {
		gone[op.id], traced[op.id] = op.tenant, true
	}
	var untraced []string
	for _, id := range ask {
		if !traced[id] {
			untraced = append(untraced, id)
		}
	}
	slices.Sort(untraced)
	return gone, untraced, nil
}

// taggedOps are the op ids the vendors' objects carry (the CRM's effects included).
func taggedOps(in CheckInput) []string {
	out := make([]string, 0, len(in.Objects)+len(in.CRM.Effects))
	for _, o := range in.Objects {
		out = append(out, o.OpID)
	}
	for _, e := range in.CRM.Effects {
		out = append(out, e.OpID)
	}
	return out
}

// answeredOps maps each op id an answer of the API named to its tenant's id.
func (h *harness) answeredOps() map[string]int64 {
	out := map[string]int64{}
	for _, c := range h.history.Calls() {
		if c.Answer.OpID == "" || c.Answer.Code < 200 || c.Answer.Code >= 300 {
			continue
		}
		if i, ok := h.client.tenantIndex(c.Key); ok && i < len(h.tenants) {
			out[c.Answer.OpID] = h.tenants[i].id
		}
	}
	return out
}
