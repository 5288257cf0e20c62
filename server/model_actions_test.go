package server_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/purge"
	"github.com/oncebox/oncebox/tenant"
)

// modelCall is one call the model made: one side effect asked for, named by its ref,
// which every request it causes carries in its body.
type modelCall struct {
	ref     string
	tenant  int
	door    string // http, mcp or go
	key     string // the idempotency key (http and go)
	tool    string
	args    map[string]string
	refused bool // no op was stored for it
	seen    bool // an op was stored for it once
}

// model is what the model knows: the calls it made and what people decided.
type model struct {
	seq      int
	calls    []*modelCall
	byRef    map[string]*modelCall
	outside  []string       // crm accounts made outside oncebox
	adopted  map[string]int // outside accounts an operator adopted, and for which tenant
	approved map[string]bool
	byPerson map[string]bool // refs of calls a person resolved as succeeded
}

func newModel() *model {
	return &model{byRef: map[string]*modelCall{}, adopted: map[string]int{}, approved: map[string]bool{},
		byPerson: map[string]bool{}}
}

func (m *model) next(prefix string) string {
	m.seq++
	return fmt.Sprintf("%s-%d", prefix, m.seq)
}

// stepOf is action f followed by a settle and the invariants.
func (w *modelWorld) stepOf(f func(*rapid.T)) func(*rapid.T) {
	return func(t *rapid.T) {
		f(t)
		w.settle(t, false)
		w.check(t)
	}
}

// actions are the model's doors, each followed by a settle and the invariants.
func (w *modelWorld) actions() map[string]func(*rapid.T) {
	step := w.stepOf
	// Enqueue is drawn twice as often as any other action: most sequences worth
	// looking at need a few ops before people and time can do anything to them.
	return map[string]func(*rapid.T){
		"enqueue":       step(w.enqueue),
		"enqueue again": step(w.enqueue),
		"replay":        step(w.replay),
		"decide":        step(w.decide),
		"resolve":       step(w.resolve),
		"advance":       step(w.advance),
		"reload":        step(w.reload),
		"restart":       step(w.restart),
		"adopt":         step(w.adopt),
	}
}

// enqueue asks for a side effect through a door: open an account (its answer lost or
// not), close an account (the tenant's, another's, an outside one or none), the
// composite note_then_wipe, or a wipe alone (unsafe: it waits for an approval).
func (w *modelWorld) enqueue(t *rapid.T) {
	w.enqueueOf(t, "open", "lost", "close", "composite", "wipe")
}

// enqueueOf is enqueue drawing what to ask for among whats (the draws in enqueue's
// order, so that the seed corpus replays).
func (w *modelWorld) enqueueOf(t *rapid.T, whats ...string) {
	c := &modelCall{tenant: rapid.IntRange(0, 1).Draw(t, "tenant"),
		door: rapid.SampledFrom([]string{"http", "mcp", "go"}).Draw(t, "door")}
	c.ref = w.m.next("c")
	c.args = map[string]string{"ref": c.ref}
	switch rapid.SampledFrom(whats).Draw(t, "what") {
	case "open":
		c.tool = "crm.open_account"
	case "lost":
		c.tool = "crm.open_account"
		w.lossy.lose(c.ref, rapid.SampledFrom([]string{"before", "after"}).Draw(t, "lost"))
	case "close":
		c.tool = "crm.close_account"
		c.args["account"] = rapid.SampledFrom(append(w.accounts(), "fx_999999")).Draw(t, "account")
	case "composite":
		c.tool = "crm.note_then_wipe"
	case "wipe":
		c.tool = "crm.wipe"
	}
	if c.door != "mcp" {
		c.key = "k-" + c.ref
	}
	w.m.calls = append(w.m.calls, c)
	w.m.byRef[c.ref] = c
	w.send(t, c)
}

// send makes c's call through its door; what the door answered is not the model's
// business (a refusal is fine), what reached the targets is.
func (w *modelWorld) send(t *rapid.T, c *modelCall) {
	tn := w.tenants[c.tenant]
	args, _ := json.Marshal(c.args)
	switch c.door {
	case "http":
		body := fmt.Sprintf(`{"tool":%q,"args":%s}`, c.tool, args)
		status, out := w.post(t, tn.agent, "/v1/ops", c.key, body)
		if status >= 500 {
			w.violation(t, fmt.Sprintf("POST /v1/ops of %s answered %d: %s", c.ref, status, out), "no input may yield a 5xx (POST /v1/ops)")
		}
	case "mcp":
		var a map[string]any
		_ = json.Unmarshal(args, &a)
		name := strings.ReplaceAll(c.tool, ".", "_")
		if _, err := w.mcpSession(t, tn).CallTool(w.ctx, &mcp.CallToolParams{Name: name, Arguments: a}); err != nil {
			t.Fatalf("MCP call %s of %s: %v", name, c.ref, err)
		}
	case "go":
		cell := w.cellOf[c.tenant]
		ob := w.api.in(cell).Outbox()
		_ = pgx.BeginFunc(w.ctx, w.cellPools[cell], func(tx pgx.Tx) error {
			_, err := ob.EnqueueTx(w.ctx, tx, outbox.EnqueueParams{TenantID: tn.id, Key: c.key, Tool: c.tool, Args: args})
			return err
		})
	}
}

// replay sends an earlier call again through the same door, or, now and then,
// another payload under its key (conflict).
func (w *modelWorld) replay(t *rapid.T) {
	if len(w.m.calls) == 0 {
		t.Skip("no call to replay")
	}
	if rapid.IntRange(0, 2).Draw(t, "conflict") == 0 {
		w.conflict(t)
		return
	}
	w.send(t, rapid.SampledFrom(w.m.calls).Draw(t, "call"))
}

// conflict sends another payload under an earlier call's key: a new call the model
// expects to be refused (unless the key's op was purged meanwhile).
func (w *modelWorld) conflict(t *rapid.T) {
	var keyed []*modelCall
	for _, c := range w.m.calls {
		if c.key != "" {
			keyed = append(keyed, c)
		}
	}
	if len(keyed) == 0 {
		t.Skip("no keyed call")
	}
	old := rapid.SampledFrom(keyed).Draw(t, "call")
	c := &modelCall{ref: w.m.next("c"), tenant: old.tenant, door: old.door, key: old.key, tool: old.tool, args: map[string]string{}}
	for k, v := range old.args {
		c.args[k] = v
	}
	c.args["ref"] = c.ref
	w.m.calls = append(w.m.calls, c)
	w.m.byRef[c.ref] = c
	w.send(t, c)
}

// post sends a JSON POST with a token and, when not empty, an idempotency key.
func (w *modelWorld) post(t *rapid.T, token, path, key, body string) (int, string) {
	req, err := http.NewRequestWithContext(w.ctx, http.MethodPost, w.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitingOp is an op a person may decide about.
type waitingOp struct {
	id, key, ref string
	tenant       int
}

// waiting lists the ops in one of statuses (in every cell), oldest first.
func (w *modelWorld) waiting(t *rapid.T, statuses ...string) []waitingOp {
	type dated struct {
		op waitingOp
		at time.Time
	}
	var all []dated
	for _, name := range w.cellNames {
		rows, err := w.cellPools[name].Query(w.ctx, `SELECT o.id::text, o.idempotency_key, coalesce(o.args->>'ref', ''), o.tenant_id,
			o.created_at FROM oncebox_op o WHERE o.status = ANY($1)`, statuses)
		if err != nil {
			t.Fatalf("list waiting ops: %v", err)
		}
		for rows.Next() {
			var d dated
			var tid int64
			if err := rows.Scan(&d.op.id, &d.op.key, &d.op.ref, &tid, &d.at); err != nil {
				t.Fatalf("scan: %v", err)
			}
			d.op.tenant = map[bool]int{true: 0, false: 1}[tid == w.tenants[0].id]
			all = append(all, d)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("list waiting ops: %v", err)
		}
	}
	slices.SortFunc(all, func(a, b dated) int {
		return cmp.Or(a.at.Compare(b.at), strings.Compare(a.op.id, b.op.id))
	})
	out := make([]waitingOp, len(all))
	for i, d := range all {
		out[i] = d.op
	}
	return out
}

// decide approves or rejects an op awaiting approval, by its tenant's approver or, now
// and then, by the other tenant's (which must change nothing).
func (w *modelWorld) decide(t *rapid.T) {
	verb := rapid.SampledFrom([]string{"approve", "reject"}).Draw(t, "verb")
	ops := w.waiting(t, "awaiting_approval")
	if len(ops) == 0 {
		t.Skip("nothing awaits approval")
	}
	op := rapid.SampledFrom(ops).Draw(t, "op")
	by := op.tenant
	if rapid.IntRange(0, 3).Draw(t, "foreign approver") == 0 {
		by = 1 - op.tenant
	}
	status, out := w.post(t, w.tenants[by].approver, "/v1/ops/"+url.PathEscape(op.key)+"/"+verb, "", `{"reason":"model"}`)
	t.Logf("%s by %s's approver: %d %s", verb, w.tenants[by].name, status, out)
	switch {
	case status >= 500:
		w.violation(t, fmt.Sprintf("%s of %s answered %d: %s", verb, op.key, status, out), "no input may yield a 5xx (%s)", verb)
	case by != op.tenant && status < 300:
		w.violation(t, fmt.Sprintf("%s's approver could %s %s's op %s (%d)", w.tenants[by].name, verb,
			w.tenants[op.tenant].name, op.key, status), "a person decided about another tenant's op (%s)", verb)
	case status < 300 && verb == "approve":
		w.m.approved[op.id] = true
	}
}

// resolve settles an op in needs_review by its tenant's approver: succeeded naming the
// right object, a made-up one or another tenant's; failed; or resend (only when the
// target holds nothing of it: a resend of what was done is a person's mistake).
func (w *modelWorld) resolve(t *rapid.T) {
	ops := w.waiting(t, "needs_review")
	if len(ops) == 0 {
		t.Skip("nothing needs review")
	}
	op := rapid.SampledFrom(ops).Draw(t, "op")
	done := w.effectOf(op.id)
	outcome := rapid.SampledFrom([]string{"succeeded", "succeeded", "failed", "resend"}).Draw(t, "outcome")
	body := fmt.Sprintf(`{"outcome":%q,"reason":"model"}`, outcome)
	switch {
	case outcome == "resend" && done != "":
		t.Skip("the target did act: a resend would be the person's mistake")
	case outcome == "succeeded":
		refs := []string{"fx_777777"}
		if done != "" {
			refs = append(refs, done)
		}
		for _, a := range w.accounts() {
			if o, ok := w.owner(a); ok && o != op.tenant {
				refs = append(refs, a)
			}
		}
		ref := rapid.SampledFrom(refs).Draw(t, "vendor_ref")
		body = fmt.Sprintf(`{"outcome":"succeeded","vendor_ref":%q,"reason":"model"}`, ref)
	}
	status, out := w.post(t, w.tenants[op.tenant].approver, "/v1/ops/"+url.PathEscape(op.key)+"/resolve", "", body)
	t.Logf("resolve %s: %d %s", body, status, out)
	if status >= 500 {
		w.violation(t, fmt.Sprintf("resolve of %s answered %d: %s", op.key, status, out), "no input may yield a 5xx (resolve)")
	}
	if status < 300 && outcome == "succeeded" {
		w.m.byPerson[w.callRef(t, op)] = true
	}
}

// callRef returns the ref of the model's call an op serves (a step's op carries its
// parent's ref).
func (w *modelWorld) callRef(t *rapid.T, op waitingOp) string {
	if op.ref == "" {
		t.Fatalf("op %s carries no ref", op.key)
	}
	return op.ref
}

// advance moves the clock past short TTLs (the ops' expiry moves back by d: their
// expires_at, and the settling of the terminal ones, from which their retention runs),
// purges, and wakes the step runners, as time passing would.
func (w *modelWorld) advance(t *rapid.T) {
	d := rapid.SampledFrom([]time.Duration{40 * time.Second, 2 * time.Minute, 3 * time.Hour}).Draw(t, "by")
	for _, name := range w.cellNames {
		w.advanceIn(t, name, d)
	}
	w.settle(t, true)
}

// advanceIn is advance's clock and purge in one cell.
func (w *modelWorld) advanceIn(t *rapid.T, cell string, d time.Duration) {
	if _, err := w.cellPools[cell].Exec(w.ctx, `UPDATE oncebox_op SET expires_at = expires_at - $1::interval,
		updated_at = CASE WHEN status IN ('succeeded', 'failed', 'rejected') THEN updated_at - $1::interval ELSE updated_at END`, d.String()); err != nil {
		t.Fatalf("move the clock: %v", err)
	}
	if _, err := w.api.in(cell).Outbox().Purge(w.ctx, purge.Config{BatchSize: 10}); err != nil {
		t.Fatalf("purge: %v", err)
	}
}

// reload changes the note's TTL in the catalog file and reloads both processes.
func (w *modelWorld) reload(t *rapid.T) {
	w.noteTTL = map[string]string{"30s": "45s", "45s": "30s"}[w.noteTTL]
	w.writeCatalog(t, w.cfg.ToolsFile)
	for _, srv := range w.api.servers() {
		if err := srv.ReloadCatalog(w.ctx); err != nil {
			t.Fatalf("reload the API's catalog: %v", err)
		}
	}
	for _, srv := range w.worker.servers() {
		if err := srv.ReloadCatalog(w.ctx); err != nil {
			t.Fatalf("reload the worker's catalog: %v", err)
		}
	}
}

// restart stops the worker process (its runs end as a shutdown ends them) and starts a
// new one.
func (w *modelWorld) restart(t *rapid.T) {
	w.worker.stop()
	w.startWorker(t)
}

// outside makes an account at the crm target without oncebox: nobody's, until adopted.
func (w *modelWorld) outside(t *rapid.T) {
	rec := httptest.NewRecorder()
	ref := w.m.next("outside")
	req, _ := http.NewRequest(http.MethodPost, "/accounts", strings.NewReader(`{"ref":"`+ref+`"}`))
	req.Header.Set("Content-Type", "application/json")
	w.crm.ServeHTTP(rec, req)
	var out struct{ ID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.ID == "" {
		t.Fatalf("outside account: %d %s", rec.Code, rec.Body)
	}
	w.m.outside = append(w.m.outside, out.ID)
}

// adopt makes an account outside oncebox, or has an operator adopt one for a tenant.
func (w *modelWorld) adopt(t *rapid.T) {
	if rapid.Bool().Draw(t, "make one") {
		w.outside(t)
		return
	}
	var free []string
	for _, id := range w.m.outside {
		if _, ok := w.m.adopted[id]; !ok {
			free = append(free, id)
		}
	}
	if len(free) == 0 {
		t.Skip("no outside account to adopt")
	}
	id := rapid.SampledFrom(free).Draw(t, "account")
	tn := rapid.IntRange(0, 1).Draw(t, "tenant")
	if _, err := tenant.NewStore(w.cellPools[w.cellOf[tn]]).Adopt(w.ctx, w.tenants[tn].name, "catalog_crm", []string{id}, "model"); err != nil {
		t.Fatalf("adopt %s: %v", id, err)
	}
	w.m.adopted[id] = tn
}
