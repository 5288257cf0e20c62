package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/oncebox/oncebox/devkit/fakemcp"
)

// The harness's SQL, in one place.
const (
	qTenantID     = `SELECT id FROM oncebox_tenant WHERE name = $1`
	qStatusCounts = `SELECT status, count(*) FROM oncebox_op WHERE tenant_id = ANY($1) GROUP BY status`
	qOpenOps      = `SELECT id::text, idempotency_key, tool, status, attempts, next_check_at, updated_at
  FROM oncebox_op WHERE tenant_id = ANY($1) AND status NOT IN ('succeeded', 'failed', 'needs_review')
  ORDER BY updated_at LIMIT 5`
	qOps = `SELECT id::text, idempotency_key, tool, status, coalesce(vendor_ref, ''),
       CASE WHEN jsonb_typeof(args->'amount') = 'number' THEN (args->>'amount')::bigint END,
       coalesce(result->'structuredContent'->>'id', ''), tenant_id
  FROM oncebox_op WHERE tenant_id = ANY($1)`
	qAttempts = `SELECT attempt, coalesce(outcome, ''), coalesce(error, ''), vendor_key, coalesce(vendor_ref, ''),
       started_at, finished_at
  FROM oncebox_attempt WHERE op_id = $1::uuid ORDER BY id`
	qEvents = `SELECT at, kind, coalesce(from_status, ''), coalesce(to_status, ''), coalesce(actor, ''),
       coalesce(detail::text, '')
  FROM oncebox_op_event WHERE op_id = $1::uuid ORDER BY id`
)

// check reads the ops and the fakes' records, prints the report and the line
// of figures, and returns the exit code.
func (h *harness) check(ctx context.Context, outcomes []outcome, settled bool, start time.Time) (int, error) {
	ops, err := h.ops(ctx)
	if err != nil {
		return exitError, err
	}
	stdioMails, err := h.stdioObjects()
	if err != nil {
		return exitError, err
	}
	in := CheckInput{Accepted: map[string]string{}, Ops: ops, Objects: append(h.fakes.objects(), stdioMails...), Planned: map[string]Plan{},
		Refused: h.fakes.refused(), AccountTenant: h.accountTenants()}
	var (
		harnessErrors     []string
		replays, double   int
		conflictsRefused  int
		conflictsExpected int
	)
	kept := make(map[string]bool, len(ops))
	for _, op := range ops {
		kept[op.ID] = true
	}
	for _, o := range outcomes {
		if o.accepted {
			in.Accepted[o.key] = o.tool
		}
		in.Planned[o.key] = o.plan
		replays += o.replays
		if o.new > 1 {
			double++
			in.Double202 = append(in.Double202, o.key)
		}
		if o.err != nil {
			harnessErrors = append(harnessErrors, o.err.Error())
		}
		switch {
		case o.notOwned != nil && h.cfg.Failover == failoverAsync && o.refundOf != "" && !kept[o.refundOf]:
			// The payment's op was lost at the fork: its payment intent is no longer one
			// of the tenant's objects, and the refund is refused before anything is sent.
			fmt.Fprintf(h.cfg.Out, "FAILOVER_LOSS: key %s: refund refused, its payment's op %s was lost at the fork: %v\n", o.key, o.refundOf, o.notOwned)
		case o.notOwned != nil:
			harnessErrors = append(harnessErrors, o.notOwned.Error())
		}
		if o.conflictStatus != 0 {
			conflictsExpected++
			switch {
			case o.conflictStatus == http.StatusUnprocessableEntity:
				conflictsRefused++
			case o.conflictStatus < 300:
				in.ConflictsAccepted = append(in.ConflictsAccepted, o.key)
			default:
				harnessErrors = append(harnessErrors, fmt.Sprintf("key %s: conflicting payload answered HTTP %d, want 422", o.key, o.conflictStatus))
			}
		}
	}
	if h.cfg.WebhookDefaultMode && h.effectKills.Load() == 0 {
		harnessErrors = append(harnessErrors, "the run never killed the serve processes after a plain receiver's delivery: the default webhook mode went unproven")
	}
	if h.mcpEffectKills.Load() == 0 || h.mcpAnswerKills.Load() == 0 {
		harnessErrors = append(harnessErrors, "the run never killed the serve processes after the MCP upstream acted, or after it answered: the upstream's lost answers went unproven")
	}
	if h.pauses.Load() == 0 {
		harnessErrors = append(harnessErrors, "the run never paused a serve process: a woken-up worker went unproven")
	}
	if h.ns != nil && (h.partitions[pathPostgres].Load() == 0 || h.partitions[pathVendors].Load() == 0) {
		harnessErrors = append(harnessErrors, "the run never cut the namespaced serve process from Postgres, or from the vendors: the partitions went unproven")
	}
	if h.mcpStdioCrashes.Load() == 0 {
		harnessErrors = append(harnessErrors, "the stdio MCP upstream never crashed after acting: its lost answers went unproven")
	}
	gatedErrs, err := h.gatedInput(ctx, &in, outcomes)
	if err != nil {
		return exitError, err
	}
	harnessErrors = append(harnessErrors, gatedErrs...)
	harnessErrors = append(harnessErrors, h.hostileInput(&in)...)
	in.CRM = CRMInput{On: h.crmOn(), Effects: h.fakes.crm.Effects()}
	var purged int
	if err := h.pool.QueryRow(ctx, qPurgedSteps, h.tenantIDs()).Scan(&purged); err != nil {
		return exitError, fmt.Errorf("count the purged steps: %w", err)
	}
	crmFig := h.crmFigures(in, purged)
	var auditFig AuditFigures
	if in.Audit, auditFig, err = h.auditCheck(ctx, h.auditUnsealed, taggedOps(in)); err != nil {
		return exitError, err
	}
	harnessErrors = append(harnessErrors, h.crmHarnessErrors(crmFig)...)
	if h.fakes.tls != nil && h.fakes.lateCounts.held.Load() == 0 {
		harnessErrors = append(harnessErrors, "the late-delivery fault never held a request: the vendors over HTTP/2 went unproven")
	}
	rep := Check(in)
	out := h.cfg.Out
	hist := CheckHistory(h.history.Calls())
	// verdict is rep, less what an asynchronous failover's loss explains (failover.go).
	verdict, illegal, failoverOK, err := h.failoverCheck(ctx, in, rep, hist.Illegal)
	if err != nil {
		return exitError, err
	}
	for i, key := range hist.Illegal {
		if i == 20 {
			fmt.Fprintf(out, "NOT LINEARIZABLE: ... and %d more keys\n", len(hist.Illegal)-i)
			break
		}
		fmt.Fprintf(out, "NOT LINEARIZABLE: key=%s: no sequential order of its calls explains the answers\n", key)
	}
	if !hist.OK() {
		fmt.Fprintf(out, "SMALLEST NON-LINEARIZABLE HISTORY (%d calls):\n%s", len(hist.Smallest), FormatHistory(hist.Smallest))
	}
	if len(hist.Unchecked) > 0 {
		fmt.Fprintf(out, "HISTORY: %d keys not checked in time: %v\n", len(hist.Unchecked), hist.Unchecked)
	}

	byID := map[string]OpRecord{}
	for _, op := range ops {
		byID[op.ID] = op
	}
	unexplained := 0
	for _, id := range rep.NeedsReview {
		explained, err := h.printHistory(ctx, byID[id], in.Objects, "needs_review")
		if err != nil {
			return exitError, err
		}
		if !explained {
			unexplained++
			fmt.Fprintf(out, "UNEXPLAINED: op=%s is in needs_review without an event or attempt saying why\n", id)
		}
	}
	for _, f := range rep.Findings() {
		fmt.Fprintln(out, f)
	}
	printed := map[string]bool{}
	for _, fs := range [][]Finding{rep.Duplicates, rep.Lost, rep.WrongAccount, rep.Mismatched, rep.ConflictLeaks, rep.Unplanned, rep.Double202, rep.Gate, rep.Contagion, rep.CRM} {
		for _, f := range fs {
			if f.OpID == "" || printed[f.OpID] {
				continue
			}
			printed[f.OpID] = true
			if _, err := h.printHistory(ctx, byID[f.OpID], in.Objects, "finding"); err != nil {
				return exitError, err
			}
		}
	}
	for i, e := range harnessErrors {
		if i == 20 {
			fmt.Fprintf(out, "HARNESS: ... and %d more\n", len(harnessErrors)-i)
			break
		}
		fmt.Fprintln(out, "HARNESS:", e)
	}

	pgRestarts := strconv.FormatInt(h.pgRestarts.Load(), 10)
	if h.pgRestartSkipped {
		pgRestarts = "skipped"
	}
	mcp := h.mcpFigures(ops, in.Objects)
	pgCrashes := strconv.FormatInt(h.pgCrashes.Load(), 10)
	if h.pgRestartSkipped {
		pgCrashes = "skipped"
	}
	fmt.Fprintf(out, "ops=%d kills=%d pg_restarts=%s pg_crashes=%s pauses=%d %s takeovers=%d faults=%d tenants=%d accounts=%d wrong_account=%d duplicates=%d lost=%d %s needs_review=%d wall=%s"+
		" succeeded=%d failed=%d replays=%d double_202=%d conflicts_refused=%d/%d serve_self_exits=%d"+
		" mismatched=%d orphans=%d conflict_leaks=%d unplanned=%d unexplained=%d harness_errors=%d settled=%t"+
		" webhook_native_keys=%t effect_kills=%d history_calls=%d non_linearizable=%d %s gate_findings=%d contagion=%d %s %s %s seed=%d\n",
		len(in.Accepted), h.kills.Load(), pgRestarts, pgCrashes, h.pauses.Load(), h.partitionFigures(), h.takeovers(), h.fakes.faults.Load(),
		len(h.tenants), len(in.AccountTenant), len(rep.WrongAccount), len(rep.Duplicates), len(rep.Lost),
		auditFig.String(len(verdict.Audit)), len(rep.NeedsReview), time.Since(start).Round(time.Second),
		rep.Statuses[statusSucceeded], rep.Statuses[statusFailed], replays, double, conflictsRefused, conflictsExpected,
		h.selfExits.Load(), len(rep.Mismatched), len(rep.Orphans), len(rep.ConflictLeaks), len(rep.Unplanned), unexplained,
		len(harnessErrors), settled, !h.cfg.WebhookDefaultMode, h.effectKills.Load(), hist.Calls, len(hist.Illegal), mcp,
		len(rep.Gate), len(rep.Contagion), h.gatedFigures(outcomes, in.Objects), h.hostileFigures(), rep.CompositeFigures, h.cfg.Seed)

	fmt.Fprintf(out, "%s http2_vendors=%t late_held=%d late_delivered=%d late_dropped=%d\n", crmFig, h.fakes.tls != nil,
		h.fakes.lateCounts.held.Load(), h.fakes.lateCounts.delivered.Load(), h.fakes.lateCounts.dropped.Load())
	if why := h.longCutBroken(); why != "" {
		fmt.Fprintln(out, "chaos:", why)
		failoverOK = false
	}
	if !verdict.OK() || len(illegal) > 0 || unexplained > 0 || len(harnessErrors) > 0 || !failoverOK {
		h.broken = true
		return exitBroken, nil
	}
	return exitGreen, nil
}

// stdioObjects returns the mails of the stdio MCP upstream, from its state file.
func (h *harness) stdioObjects() ([]VendorObject, error) {
	st, err := fakemcp.ReadState(h.mcpStdioState)
	if err != nil {
		return nil, fmt.Errorf("read the stdio upstream's state: %w", err)
	}
	out := make([]VendorObject, 0, len(st.Mails))
	for _, m := range st.Mails {
		out = append(out, VendorObject{Kind: kindMCPStdioMail, ID: m.ID, OpID: m.Ref, Effect: true,
			Conflict: strings.Contains(m.Subject, conflictMarker),
			Detail:   fmt.Sprintf("(upstream %s, to %s)", mcpStdioUpstream, m.To)})
	}
	return out, nil
}

// upstreamCounts counts the ops of tool by status, and the objects of kind.
func upstreamCounts(ops []OpRecord, objects []VendorObject, tool, kind string) (n int, statuses map[string]int, mails int) {
	statuses = map[string]int{}
	for _, op := range ops {
		if op.Tool == tool {
			n++
			statuses[op.Status]++
		}
	}
	for _, o := range objects {
		if o.Kind == kind {
			mails++
		}
	}
	return n, statuses, mails
}

// mcpFigures are the upstream MCP figures of the line. For the HTTP upstream: its ops
// by status, the mails and refusals the fake records, the calls it answered from a
// native key, the faults it drew, and the kills after it acted and after it answered;
// for the stdio one: its ops by status, its mails and its crashes after acting.
func (h *harness) mcpFigures(ops []OpRecord, objects []VendorObject) string {
	n, statuses, mails := upstreamCounts(ops, objects, toolMCP, kindMCPMail)
	sn, sstatuses, smails := upstreamCounts(ops, objects, toolMCPStdio, kindMCPStdioMail)
	faults := 0
	for _, c := range h.fakes.mcp.Faults() {
		faults += c
	}
	return fmt.Sprintf("mcp_ops=%d mcp_succeeded=%d mcp_failed=%d mcp_needs_review=%d mcp_mails=%d mcp_refusals=%d"+
		" mcp_calls=%d mcp_key_replays=%d mcp_faults=%d mcp_kills=%d+%d mcp_native_keys=%t"+
		" mcp_stdio_ops=%d mcp_stdio_succeeded=%d mcp_stdio_failed=%d mcp_stdio_needs_review=%d mcp_stdio_mails=%d mcp_stdio_crashes=%d",
		n, statuses[statusSucceeded], statuses[statusFailed], statuses[statusNeedsReview], mails, len(h.fakes.mcp.Refusals()),
		h.fakes.mcp.Calls(), h.fakes.mcp.Replays(), faults, h.mcpEffectKills.Load(), h.mcpAnswerKills.Load(), !h.cfg.WebhookDefaultMode,
		sn, sstatuses[statusSucceeded], sstatuses[statusFailed], sstatuses[statusNeedsReview], smails, h.mcpStdioCrashes.Load())
}

// ops reads the tenants' ops.
func (h *harness) ops(ctx context.Context) ([]OpRecord, error) {
	rows, err := h.pool.Query(ctx, qOps, h.tenantIDs())
	if err != nil {
		return nil, fmt.Errorf("read ops: %w", err)
	}
	defer rows.Close()
	labels := make(map[int64]string, len(h.tenants))
	for _, t := range h.tenants {
		labels[t.id] = t.label
	}
	var ops []OpRecord
	for rows.Next() {
		var (
			op       OpRecord
			tenantID int64
		)
		if err := rows.Scan(&op.ID, &op.Key, &op.Tool, &op.Status, &op.VendorRef, &op.Amount, &op.ResultRef, &tenantID); err != nil {
			return nil, fmt.Errorf("read ops: %w", err)
		}
		op.Tenant = labels[tenantID]
		ops = append(ops, op)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read ops: %w", err)
	}
	return ops, nil
}

// printHistory prints an op's attempts, events and vendor objects, and
// reports whether they say why the op is in needs_review.
func (h *harness) printHistory(ctx context.Context, op OpRecord, objects []VendorObject, why string) (bool, error) {
	out := h.cfg.Out
	fmt.Fprintf(out, "%s: op=%s key=%s tool=%s status=%s\n", strings.ToUpper(why), op.ID, op.Key, op.Tool, op.Status)
	explained := false
	rows, err := h.pool.Query(ctx, qAttempts, op.ID)
	if err != nil {
		return false, fmt.Errorf("read attempts: %w", err)
	}
	for rows.Next() {
		var (
			n                            int
			outcome, errText, vkey, vref string
			started                      time.Time
			finished                     *time.Time
		)
		if err := rows.Scan(&n, &outcome, &errText, &vkey, &vref, &started, &finished); err != nil {
			rows.Close()
			return false, fmt.Errorf("read attempts: %w", err)
		}
		fin := "unfinished"
		if finished != nil {
			fin = finished.Format(time.StampMilli)
		}
		fmt.Fprintf(out, "  attempt %d %s..%s outcome=%q vendor_key=%s vendor_ref=%s error=%q\n",
			n, started.Format(time.StampMilli), fin, outcome, vkey, vref, errText)
		if outcome != "" || errText != "" {
			explained = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read attempts: %w", err)
	}
	rows, err = h.pool.Query(ctx, qEvents, op.ID)
	if err != nil {
		return false, fmt.Errorf("read events: %w", err)
	}
	for rows.Next() {
		var (
			at                            time.Time
			kind, from, to, actor, detail string
		)
		if err := rows.Scan(&at, &kind, &from, &to, &actor, &detail); err != nil {
			rows.Close()
			return false, fmt.Errorf("read events: %w", err)
		}
		fmt.Fprintf(out, "  event %s %s %s->%s actor=%s detail=%s\n", at.Format(time.StampMilli), kind, from, to, actor, detail)
		if to == statusNeedsReview {
			explained = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read events: %w", err)
	}
	for _, obj := range objects {
		if obj.OpID == op.ID {
			fmt.Fprintf(out, "  vendor %s %s effect=%t %s\n", obj.Kind, obj.ID, obj.Effect, obj.Detail)
		}
	}
	return explained, nil
}

// takeovers counts, in the serve processes' logs, the dispatch jobs of gone processes
// taken over at once (outbox's liveness): each SIGKILL with a job in flight should
// show one, and none should come from a paused process, which holds its lock.
func (h *harness) takeovers() int {
	files, _ := filepath.Glob(filepath.Join(h.logDir, "*.log"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n += bytes.Count(b, []byte("took over the dispatch job of a gone process"))
	}
	return n
}
