package server_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"pgregory.net/rapid"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
)

// check asserts the invariants on what the fake targets recorded.
func (w *modelWorld) check(t *rapid.T) {
	status := w.callStatuses(t)
	crm, notes := effectsByRef(w.crm), effectsByRef(w.notes)
	for _, byRef := range []map[[2]string][]fakewebhook.Effect{crm, notes} {
		for k, effects := range byRef {
			w.checkAtMostOnce(t, k, effects)
		}
	}
	for _, c := range w.m.calls {
		if status[c.ref] == "succeeded" && !w.m.byPerson[c.ref] {
			for _, path := range c.paths() {
				n := len(crm[[2]string{path, c.ref}]) + len(notes[[2]string{path, c.ref}])
				if n != 1 {
					w.violation(t, fmt.Sprintf("%s succeeded but the target holds %d effects of it at %s", w.describe(c), n, path),
						"an op succeeded yet its side effect is not at the target exactly once (%s, %s)", c.tool, pathClass(path))
				}
			}
		}
	}
	w.checkOwned(t)
	w.checkApproved(t)
	w.checkAudited(t)
}

// checkAudited: every op of each tenant, kept or purged since, has its story in the
// audit log (docs/audit.md): its call once and first, no status recorded twice, its
// last status the op's, and the sealed chain verifies. Ops and log are read in one
// snapshot.
func (w *modelWorld) checkAudited(t *rapid.T) {
	for i, tn := range w.tenants {
		w.checkAuditedIn(t, tn, w.cellPools[w.cellOf[i]])
	}
}

// checkAuditedIn is checkAudited for one tenant, in its cell.
func (w *modelWorld) checkAuditedIn(t *rapid.T, tn *modelTenant, pool *pgxpool.Pool) {
	tx, err := pool.BeginTx(w.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback(context.WithoutCancel(w.ctx)) //nolint:errcheck // read only
	want := map[string]string{}
	for id, tenant := range w.seenOps {
		if tenant == tn.id {
			want[id] = "" // purged, unless it is still there
		}
	}
	rows, err := tx.Query(w.ctx, "SELECT id::text, status FROM oncebox_op WHERE tenant_id = $1", tn.id)
	if err != nil {
		t.Fatalf("read the ops: %v", err)
	}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatalf("scan: %v", err)
		}
		want[id] = status
		w.seenOps[id] = tn.id
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the ops: %v", err)
	}
	problems, err := audit.CheckOps(w.ctx, tx, tn.id, want)
	if err != nil {
		t.Fatalf("check the audit log: %v", err)
	}
	if len(problems) > 0 {
		w.violation(t, strings.Join(problems, "; "), "an op's audit log does not tell its story (a call missing or repeated, a status recorded twice or not the op's, or a broken chain)")
	}
}

// checkAtMostOnce: a call's side effect reaches its target at most once, and a call
// refused (no op stored) never reaches it.
func (w *modelWorld) checkAtMostOnce(t *rapid.T, k [2]string, effects []fakewebhook.Effect) {
	if strings.HasPrefix(k[1], "outside-") {
		return
	}
	c, ok := w.m.byRef[k[1]]
	if !ok {
		w.violation(t, fmt.Sprintf("ref %q at %s", k[1], k[0]), "the target received a POST that no call of the model made")
	}
	if c.refused {
		w.violation(t, fmt.Sprintf("%s was refused (no op was stored) yet the target received POST %s", w.describe(c), k[0]),
			"a refused call reached the target (%s)", c.tool)
	}
	if len(effects) > 1 {
		ops := make([]string, len(effects))
		for i, e := range effects {
			ops[i] = e.OpID
		}
		w.violation(t, fmt.Sprintf("the target received POST %s %d times for %s, from ops %s", k[0], len(effects), w.describe(c),
			strings.Join(ops, ", ")), "a side effect was done more than once for one op: the target received %s's POST %s again",
			c.tool, pathClass(k[0]))
	}
}

// checkOwned: every account closed was the closing op's tenant's (made by its op, or
// adopted for it by an operator).
func (w *modelWorld) checkOwned(t *rapid.T) {
	for _, e := range w.crm.Effects() {
		account, ok := strings.CutPrefix(e.Path, "/accounts/")
		if !ok {
			continue
		}
		account = strings.TrimSuffix(account, "/close")
		c := w.m.byRef[bodyRef(e.Body)]
		if c == nil {
			continue // checkAtMostOnce names it
		}
		owner, owned := w.owner(account)
		switch {
		case !owned:
			w.violation(t, fmt.Sprintf("%s closed account %s, which is no tenant's", w.describe(c), account),
				"an op acted on an object that is not its tenant's: an account no tenant owns was closed")
		case owner != c.tenant:
			w.violation(t, fmt.Sprintf("%s closed account %s, which is %s's", w.describe(c), account, w.tenants[owner].name),
				"an op acted on an object that is not its tenant's: one tenant's op closed the other tenant's account")
		}
	}
}

// checkApproved: no unsafe wipe reached its target without an approval by a person of
// its tenant.
func (w *modelWorld) checkApproved(t *rapid.T) {
	for _, e := range w.notes.Effects() {
		if e.Path != "/wipe" || w.m.approved[e.OpID] {
			continue
		}
		desc := "an unknown call"
		if c := w.m.byRef[bodyRef(e.Body)]; c != nil {
			desc = w.describe(c)
		}
		w.violation(t, fmt.Sprintf("the target received POST /wipe for %s from op %s, which no approver of its tenant approved", desc, e.OpID),
			"an unsafe op went out without its approval: the target received a POST /wipe no approver of its tenant approved")
	}
}

// callStatuses reads the status of each call's op (a step's op is not the call's) and
// marks the calls no op was ever stored for as refused.
func (w *modelWorld) callStatuses(t *rapid.T) map[string]string {
	out := map[string]string{}
	for _, name := range w.cellNames {
		rows, err := w.cellPools[name].Query(w.ctx, `SELECT args->>'ref', status FROM oncebox_op
		WHERE idempotency_key NOT LIKE '~step/%' AND args->>'ref' IS NOT NULL`)
		if err != nil {
			t.Fatalf("read the ops: %v", err)
		}
		for rows.Next() {
			var ref, status string
			if err := rows.Scan(&ref, &status); err != nil {
				t.Fatalf("scan: %v", err)
			}
			out[ref] = status
		}
		rows.Close()
	}
	for _, c := range w.m.calls {
		if _, ok := out[c.ref]; ok {
			c.seen = true
		}
		c.refused = !c.seen
	}
	return out
}

// paths are where c's side effects go.
func (c *modelCall) paths() []string {
	switch c.tool {
	case "crm.open_account":
		return []string{"/accounts"}
	case "crm.close_account":
		return []string{"/accounts/" + c.args["account"] + "/close"}
	case "crm.wipe":
		return []string{"/wipe"}
	}
	return []string{"/short", "/wipe"}
}

// describe names a call for a failure message.
func (w *modelWorld) describe(c *modelCall) string {
	key := c.key
	if key == "" {
		key = "minted by MCP"
	}
	return fmt.Sprintf("%s's call %s (%s %v through %s, key %s)", w.tenants[c.tenant].name, c.ref, c.tool, c.args, c.door, key)
}

// violation fails the check: the sentence names the broken invariant in words that do
// not change from one run of the same sequence to the next (rapid minimises a failure
// only while its message stays the same); what differs (op ids, refs) and the ops as
// the database holds them are logged before it.
func (w *modelWorld) violation(t *rapid.T, details, sentence string, args ...any) {
	t.Logf("%s", details)
	w.dump(t)
	t.Fatalf(sentence, args...)
}

// dump logs every op and every effect the targets recorded.
func (w *modelWorld) dump(t *rapid.T) {
	for _, name := range w.cellNames {
		w.dumpCell(t, name)
	}
	for name, f := range map[string]*fakewebhook.Server{"crm": w.crm, "notes": w.notes} {
		for _, e := range f.Effects() {
			t.Logf("%s effect %s: POST %s from op %s, body %s", name, e.ID, e.Path, e.OpID, e.Body)
		}
	}
}

// dumpCell logs every op of a cell.
func (w *modelWorld) dumpCell(t *rapid.T, cell string) {
	rows, err := w.cellPools[cell].Query(w.ctx, `SELECT id::text, idempotency_key, status, generation, coalesce(vendor_ref, ''),
		coalesce(args::text, '') FROM oncebox_op ORDER BY created_at, id`)
	if err != nil {
		t.Logf("ops: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id, key, status, ref, args string
		var gen int
		_ = rows.Scan(&id, &key, &status, &gen, &ref, &args)
		t.Logf("%s: op %s key %s status %s generation %d vendor_ref %q args %s", cell, id, key, status, gen, ref, args)
	}
}

// pathClass is a path with its object id replaced by the template's name.
func pathClass(path string) string {
	if strings.HasPrefix(path, "/accounts/") {
		return "/accounts/{account}/close"
	}
	return path
}
