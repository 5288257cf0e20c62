package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
)

// Where features meet (issue 42): a fake CRM, a catalog target that does not
// deduplicate keys (every POST is an effect), offers tools that cross TTL purges,
// approvals, steps, people's resolves and ownership.
//
// TTL purges while ops wait for approval: crm.note (write) and crm.wipe (unsafe) keep
// their ops crmTTL, the serve processes purge every crmPurgeInterval, and the composite
// tool crm.note_then_wipe writes a note, then wipes, the wipe waiting for approval. The
// harness approves each wipe only crmApproveAfter after its op appeared: past the note's
// TTL and a purge. The verdict wants, from the CRM's own records, every note and wipe
// made at most once, and each composite op ended succeeded with one note and one wipe
// (or in needs_review, a person told, with at most one of each).
//
// People's resolves: crm.open_account goes to the blind CRM target (its lookup answers
// 404), whose answers the CRM drops after acting now and then: the op goes to
// needs_review. Tenant B's approver resolves B's such ops during the chaos, succeeded
// with a vendor_ref that is, in turn, tenant A's account, one that does not exist, and
// the op's own account; B's agent then closes that account (crm.close_account, owned:
// [account]). The verdict: no account closed by an op of a tenant other than the one
// whose op opened it, none closed that nobody opened.

// The CRM's tools and targets.
const (
	crmTarget        = "crm"
	crmBlindTarget   = "crmblind"
	crmBlindPrefix   = "/blind"
	toolNote         = "crm.note"
	toolWipe         = "crm.wipe"
	toolNoteThenWipe = "crm.note_then_wipe"
	toolOpen         = "crm.open_account"
	toolClose        = "crm.close_account"
)

// crmTTL is the notes' and wipes' TTL, crmPurgeInterval the serve processes' purge
// interval, crmApproveAfter how long a wipe waits for its approval: past the note's
// TTL and a purge.
const (
	crmTTL           = 3 * time.Second
	crmPurgeInterval = 2 * time.Second
	crmApproveAfter  = 9 * time.Second
)

// The resolves tenant B's approver makes, in turn.
const (
	resolveForeign = "foreign" // tenant A's account
	resolveWrong   = "wrong"   // an account nobody opened
	resolveRight   = "right"   // the op's own account, as the CRM records it
)

// isCRMTool reports whether tool is one of the CRM's.
func isCRMTool(tool string) bool {
	switch tool {
	case toolNote, toolWipe, toolNoteThenWipe, toolOpen, toolClose:
		return true
	}
	return false
}

// crmOn reports whether the run has the CRM: not in a rolling upgrade (the previous
// release's processes), nor in a failover (a fork loses op rows, and resolves of lost
// ops answer 404).
func (h *harness) crmOn() bool { return h.cfg.UpgradeFrom == "" && h.cfg.Failover == "" }

// crmState is the CRM's side of a run.
type crmState struct {
	// approverB is tenant B's approver token.
	approverB string
	// approved counts the wipes approved; resolved the resolves by kind, and the
	// closes sent after them by their answer.
	approved atomic.Int64
	mu       sync.Mutex
	handled  map[string]bool
	resolves map[string]int
	refused  map[string]int
	closes   map[string]int
	next     int
}

// crmTargets is the CRM's entry in the catalog's targets.
func (h *harness) crmTargets(crmURL string) string {
	if !h.crmOn() {
		return ""
	}
	return fmt.Sprintf(`targets:
  %s: {base_url: %q, lookup_path: /_lookup}
  %s: {base_url: %q, lookup_path: /_lookup}
`, crmTarget, crmURL, crmBlindTarget, crmURL+crmBlindPrefix)
}

// crmCatalog is the CRM's tools in the catalog's tools.
func (h *harness) crmCatalog() string {
	if !h.crmOn() {
		return ""
	}
	return fmt.Sprintf(`  %[1]s:
    description: Write a note on a record.
    class: write
    target: %[6]s
    path: /notes/{ref}
    input_schema: {type: object, properties: {ref: {type: string}, text: {type: string}}, required: [ref]}
    ttl: %[8]s
  %[2]s:
    description: Wipe a record.
    class: unsafe
    target: %[6]s
    path: /wipes/{ref}
    input_schema: {type: object, properties: {ref: {type: string}}, required: [ref]}
    ttl: %[8]s
  %[3]s:
    description: Write a note on a record, then wipe it.
    input_schema: {type: object, properties: {ref: {type: string}}, required: [ref]}
    steps:
      - name: note
        tool: %[1]s
        args: {ref: {$from: /call/ref}, text: before the wipe}
      - name: wipe
        tool: %[2]s
        args: {ref: {$from: /call/ref}}
  %[4]s:
    description: Open an account.
    class: write
    target: %[7]s
    path: /accounts
    input_schema: {type: object, properties: {name: {type: string}}, required: [name]}
  %[5]s:
    description: Close an account.
    class: write
    target: %[7]s
    path: /accounts/{account}/close
    owned: [account]
    input_schema: {type: object, properties: {account: {type: string}}, required: [account]}
`, toolNote, toolWipe, toolNoteThenWipe, toolOpen, toolClose, crmTarget, crmBlindTarget, crmTTL)
}

// prepareCRM creates tenant B's approver token.
func (h *harness) prepareCRM(ctx context.Context) error {
	h.crm.handled, h.crm.resolves, h.crm.refused, h.crm.closes = map[string]bool{}, map[string]int{}, map[string]int{}, map[string]int{}
	if !h.crmOn() || len(h.tenants) < 2 {
		return nil
	}
	tok, err := h.approverToken(ctx, h.tenants[1].name)
	if err != nil {
		return err
	}
	h.crm.approverB = tok
	if h.approver == "" {
		h.approver, err = h.approverToken(ctx, h.tenants[0].name)
	}
	return err
}

// approverToken creates an approver token of tenant.
func (h *harness) approverToken(ctx context.Context, tenant string) (string, error) {
	out, err := h.oncebox(ctx, "tenant", "--database-url", h.dbURL, "--role", "approver", "--person", "approver@chaos.example",
		"token", "create", tenant)
	if err != nil {
		return "", fmt.Errorf("oncebox tenant token create --role approver %s: %w\n%s", tenant, err, out)
	}
	lines := strings.Fields(strings.TrimSpace(string(out)))
	if len(lines) == 0 {
		return "", fmt.Errorf("oncebox tenant token create --role approver %s printed no token", tenant)
	}
	return lines[len(lines)-1], nil
}

// crmItem fills it as a CRM call: a composite note-then-wipe (ref: its key), or an
// account opened.
func crmItem(it *item, i int, composite bool) {
	if composite {
		it.tool, it.args = toolNoteThenWipe, map[string]any{"ref": it.key}
		return
	}
	it.tool, it.args = toolOpen, map[string]any{"name": fmt.Sprintf("account %d", i)}
}

// qAwaitingWipes are the wipes of tenant $1 waiting for approval for longer than $2.
const qAwaitingWipes = `SELECT idempotency_key FROM oncebox_op
  WHERE tenant_id = $1 AND tool = '` + toolWipe + `' AND status = 'awaiting_approval' AND created_at < now() - $2::interval`

// approveLoop approves, every second, the wipes that have waited crmApproveAfter,
// until ctx ends (after the settling, which waits for their composite ops).
func (h *harness) approveLoop(ctx context.Context) {
	if !h.crmOn() {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		var keys []string
		rows, err := h.pool.Query(ctx, qAwaitingWipes, h.tenants[0].id, crmApproveAfter.String())
		if err == nil {
			for rows.Next() {
				var k string
				if rows.Scan(&k) == nil {
					keys = append(keys, k)
				}
			}
			rows.Close()
		}
		for _, k := range keys {
			status, body, err := h.opCall(ctx, h.approver, k, "approve", `{"reason":"chaos: past the note's TTL"}`)
			switch {
			case err == nil && status == http.StatusOK:
				h.crm.approved.Add(1)
			case err != nil || status >= 500:
				// Tried again at the next tick.
			default:
				h.logger.Warn("approve a wipe", slog.String("key", k), slog.Int("status", status), slog.String("answer", string(body)))
			}
		}
	}
}

// opCall posts body to /v1/ops/{key}/{verb} with token, on a healthy process.
func (h *harness) opCall(ctx context.Context, token, key, verb, body string) (int, []byte, error) {
	base := h.client.bases[int(h.client.next.Add(1))%len(h.client.bases)]
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/ops/"+url.PathEscape(key)+"/"+verb, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, b, err
}

// qReviewOpens are tenant $1's account openings in needs_review.
const qReviewOpens = `SELECT id::text, idempotency_key FROM oncebox_op
  WHERE tenant_id = $1 AND tool = '` + toolOpen + `' AND status = 'needs_review'`

// resolveLoop resolves, every 2 s while the chaos lasts, tenant B's account openings in
// needs_review, each with the next kind of vendor_ref, and closes the account named.
func (h *harness) resolveLoop(ctx context.Context) {
	if !h.crmOn() || h.crm.approverB == "" {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		type review struct{ id, key string }
		var todo []review
		rows, err := h.pool.Query(ctx, qReviewOpens, h.tenants[1].id)
		if err != nil {
			continue
		}
		for rows.Next() {
			var r review
			if rows.Scan(&r.id, &r.key) == nil && !h.crm.handled[r.key] {
				todo = append(todo, r)
			}
		}
		rows.Close()
		for _, r := range todo {
			h.resolveAndClose(ctx, r.id, r.key)
		}
	}
}

// resolveAndClose resolves B's op with the next kind of vendor_ref, then has B's
// agent close the account that ref names.
func (h *harness) resolveAndClose(ctx context.Context, opID, key string) {
	kinds := []string{resolveForeign, resolveWrong, resolveRight}
	h.crm.mu.Lock()
	kind := kinds[h.crm.next%len(kinds)]
	h.crm.mu.Unlock()
	ref := h.crmRef(ctx, kind, opID)
	if ref == "" {
		return // nothing of that kind yet: next round
	}
	body, _ := json.Marshal(map[string]string{"outcome": "succeeded", "vendor_ref": ref, "reason": "chaos: " + kind + " ref"})
	status, answer, err := h.opCall(ctx, h.crm.approverB, key, "resolve", string(body))
	if err != nil || status >= 500 {
		return // tried again next round
	}
	h.crm.mu.Lock()
	h.crm.handled[key] = true
	h.crm.next++
	h.crm.resolves[kind]++
	if status != http.StatusOK {
		h.crm.refused[kind]++
	}
	h.crm.mu.Unlock()
	h.logger.Info("resolved a needs_review op", slog.String("key", key), slog.String("ref_kind", kind), slog.Int("status", status),
		slog.String("answer", string(answer)))
	closeKey := fmt.Sprintf("%s-close-%s", key, kind)
	h.client.bind(closeKey, 1)
	res, err := h.client.post(ctx, int(h.client.next.Add(1)), closeKey, toolClose, map[string]any{"account": ref})
	h.crm.mu.Lock()
	defer h.crm.mu.Unlock()
	switch {
	case err != nil:
		h.crm.closes["error"]++
	case res.status == http.StatusAccepted || res.status == http.StatusOK:
		h.crm.closes[kind+"_accepted"]++
	default:
		h.crm.closes[kind+"_refused"]++
	}
}

// crmRef returns the vendor_ref a resolve of kind names for B's op opID: an account
// tenant A's op opened, one nobody opened, or the op's own, from the CRM's records; ""
// when there is none.
func (h *harness) crmRef(ctx context.Context, kind, opID string) string {
	switch kind {
	case resolveWrong:
		return fmt.Sprintf("eff_nobody%d", rand.IntN(1_000_000))
	case resolveRight:
		for _, e := range h.fakes.crm.EffectsFor(opID) {
			if e.Path == crmBlindPrefix+"/accounts" {
				return e.ID
			}
		}
		return fmt.Sprintf("eff_nobody%d", rand.IntN(1_000_000))
	}
	ids := map[string]bool{}
	rows, err := h.pool.Query(ctx, `SELECT id::text FROM oncebox_op WHERE tenant_id = $1 AND tool = '`+toolOpen+`'`, h.tenants[0].id)
	if err != nil {
		return ""
	}
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			ids[id] = true
		}
	}
	rows.Close()
	for _, e := range h.fakes.crm.Effects() {
		if e.Path == crmBlindPrefix+"/accounts" && ids[e.OpID] {
			return e.ID
		}
	}
	return ""
}

// CRMInput is what the verdict needs of the CRM.
type CRMInput struct {
	// On says the run had the CRM.
	On bool
	// Effects are the CRM's effects, from its own records.
	Effects []fakewebhook.Effect
}

// CRMFigures are the CRM's counts of the summary line.
type CRMFigures struct {
	Composites, Succeeded, Review, Notes, Wipes, Purged, Approved int
	Resolves, Refused, Closes                                     map[string]int
}

// checkCRM finds, from the CRM's records: a note or a wipe made twice for one ref (a
// step done again), a wipe for no composite op; a composite op not ended as it should
// (succeeded with one note and one wipe, or in needs_review with at most one of each);
// an op of the CRM with two effects; and an account closed by an op of another tenant
// than the one whose op opened it, or that no op opened.
func checkCRM(in CheckInput, byID map[string]OpRecord) []Finding {
	if !in.CRM.On {
		return nil
	}
	var out []Finding
	byPath, byOp, byEffect := map[string]int{}, map[string][]fakewebhook.Effect{}, map[string]fakewebhook.Effect{}
	for _, e := range in.CRM.Effects {
		byPath[e.Path]++
		byOp[e.OpID] = append(byOp[e.OpID], e)
		byEffect[e.ID] = e
	}
	for _, e := range in.CRM.Effects {
		if strings.Contains(e.Path, conflictMarker) || bytes.Contains(e.Body, []byte(conflictMarker)) {
			out = append(out, Finding{OpID: e.OpID, Key: byID[e.OpID].Key, What: fmt.Sprintf("a conflicting payload reached the CRM: POST %s %s", e.Path, e.Body)})
		}
	}
	for path, n := range byPath {
		if n > 1 && !strings.HasPrefix(path, crmBlindPrefix+"/") {
			out = append(out, Finding{What: fmt.Sprintf("the CRM received POST %s %d times: a step of a composite op done again", path, n)})
		}
	}
	for _, op := range in.Ops {
		if op.Tool != toolNoteThenWipe {
			continue
		}
		notes, wipes := byPath["/notes/"+op.Key], byPath["/wipes/"+op.Key]
		switch {
		case op.Status == statusSucceeded && notes == 1 && wipes == 1:
		case op.Status == statusNeedsReview && notes <= 1 && wipes <= 1:
		default:
			out = append(out, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s op ended %s with %d notes and %d wipes at the CRM: want succeeded with one of each (or needs_review, at most one of each)", op.Tool, op.Status, notes, wipes)})
		}
	}
	for opID, es := range byOp {
		if len(es) > 1 && strings.HasPrefix(es[0].Path, crmBlindPrefix+"/") {
			out = append(out, Finding{OpID: opID, Key: byID[opID].Key, What: fmt.Sprintf("%s op has %d effects at the CRM", byID[opID].Tool, len(es))})
		}
	}
	for _, e := range in.CRM.Effects {
		acct, ok := strings.CutPrefix(e.Path, crmBlindPrefix+"/accounts/")
		if !ok {
			continue
		}
		acct = strings.TrimSuffix(acct, "/close")
		closer := byID[e.OpID]
		opened, made := byEffect[acct]
		opener, known := byID[opened.OpID]
		// An account nobody opened (a wrong ref) is nobody's: closing it does nothing.
		if made && (!known || opener.Tenant != closer.Tenant) {
			out = append(out, Finding{OpID: closer.ID, Key: closer.Key,
				What: fmt.Sprintf("CROSS_TENANT: op of tenant %s closed account %s, opened by op %s of tenant %q (%s)", closer.Tenant, acct, opened.OpID, opener.Tenant, e.Path)})
		}
	}
	return out
}

// qOpenNotCRM counts the open ops of the tenants that are not the CRM's note-then-wipe
// and its steps.
const qOpenNotCRM = `SELECT count(*) FROM oncebox_op WHERE tenant_id = ANY($1)
  AND status NOT IN ('succeeded', 'failed', 'needs_review', 'rejected', 'awaiting_approval')
  AND tool NOT IN ('` + toolNoteThenWipe + `', '` + toolNote + `', '` + toolWipe + `')`

// stepsRunaway reports whether the only ops left open are the CRM's note-then-wipe
// ops and their steps while some note was made twice already: the runner redoes purged
// steps (issue 42), every purge cycle, and would keep the run waiting to its cap for a
// verdict already known.
func (h *harness) stepsRunaway(ctx context.Context) bool {
	if !h.crmOn() {
		return false
	}
	var n int
	if h.pool.QueryRow(ctx, qOpenNotCRM, h.tenantIDs()).Scan(&n) != nil || n > 0 {
		return false
	}
	notes := map[string]int{}
	for _, e := range h.fakes.crm.Effects() {
		if strings.HasPrefix(e.Path, "/notes/") {
			notes[e.Path]++
			if notes[e.Path] > 1 {
				return true
			}
		}
	}
	return false
}

// crmFigures counts what the CRM saw.
func (h *harness) crmFigures(in CheckInput, purged int) CRMFigures {
	f := CRMFigures{Approved: int(h.crm.approved.Load()), Purged: purged}
	for _, op := range in.Ops {
		if op.Tool == toolNoteThenWipe {
			f.Composites++
			switch op.Status {
			case statusSucceeded:
				f.Succeeded++
			case statusNeedsReview:
				f.Review++
			}
		}
	}
	for _, e := range in.CRM.Effects {
		switch {
		case strings.HasPrefix(e.Path, "/notes/"):
			f.Notes++
		case strings.HasPrefix(e.Path, "/wipes/"):
			f.Wipes++
		}
	}
	h.crm.mu.Lock()
	defer h.crm.mu.Unlock()
	f.Resolves, f.Refused, f.Closes = h.crm.resolves, h.crm.refused, h.crm.closes
	return f
}

// String is the figures as the summary line prints them.
func (f CRMFigures) String() string {
	return fmt.Sprintf("ttl_composites=%d ttl_composite_succeeded=%d ttl_composite_needs_review=%d ttl_notes=%d ttl_wipes=%d ttl_steps_purged=%d ttl_wipes_approved=%d"+
		" resolves_foreign=%d resolves_wrong=%d resolves_right=%d resolves_refused=%d+%d+%d closes_after_foreign=%d/%d closes_after_wrong=%d/%d closes_after_right=%d/%d",
		f.Composites, f.Succeeded, f.Review, f.Notes, f.Wipes, f.Purged, f.Approved,
		f.Resolves[resolveForeign], f.Resolves[resolveWrong], f.Resolves[resolveRight],
		f.Refused[resolveForeign], f.Refused[resolveWrong], f.Refused[resolveRight],
		f.Closes[resolveForeign+"_accepted"], f.Closes[resolveForeign+"_accepted"]+f.Closes[resolveForeign+"_refused"],
		f.Closes[resolveWrong+"_accepted"], f.Closes[resolveWrong+"_accepted"]+f.Closes[resolveWrong+"_refused"],
		f.Closes[resolveRight+"_accepted"], f.Closes[resolveRight+"_accepted"]+f.Closes[resolveRight+"_refused"])
}

// qPurgedSteps counts the steps' ops of the CRM's composite tool the purge deleted
// (their tombstones).
const qPurgedSteps = `SELECT count(*) FROM oncebox_tombstone WHERE tenant_id = ANY($1) AND idempotency_key LIKE '~step/%/note'`

// crmHarnessErrors says what the run left unproven.
func (h *harness) crmHarnessErrors(f CRMFigures) []string {
	if !h.crmOn() {
		return nil
	}
	var errs []string
	if f.Composites == 0 || f.Approved == 0 {
		errs = append(errs, "no composite op's wipe was approved past its note's TTL: the TTL purge among approvals went unproven")
	}
	if f.Resolves[resolveForeign] == 0 {
		errs = append(errs, "tenant B's approver never resolved an op with tenant A's account: the foreign ref went unproven")
	}
	return errs
}
