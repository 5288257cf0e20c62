package server_test

import (
	"strings"
	"time"

	"github.com/riverqueue/river/rivertype"
	"pgregory.net/rapid"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
)

// modelSettleWithin bounds how long the model waits for every op to settle or wait for
// a person after an action: far more than a dispatch, a sweep and a step run take.
const modelSettleWithin = 45 * time.Second

// sqlModelBusy lists the ops neither settled nor waiting for a person: a composite op
// whose run waits on a step's approval or review waits for that person too.
const sqlModelBusy = `
SELECT p.idempotency_key || ' (' || p.status || ')' FROM oncebox_op p
WHERE p.status NOT IN ('succeeded', 'failed', 'rejected', 'needs_review', 'awaiting_approval')
  AND NOT EXISTS (SELECT 1 FROM oncebox_op s WHERE s.tenant_id = p.tenant_id
    AND s.idempotency_key LIKE '~step/' || p.id::text || '/%' AND s.status IN ('awaiting_approval', 'needs_review'))
ORDER BY 1`

// settle waits until every op is settled or waits for a person, waking the step
// runners as time passing would (a snoozed runner looks again within 5 s anyway). With
// wake, it first waits for every runner to have looked at its steps after now.
func (w *modelWorld) settle(t *rapid.T, wake bool) {
	deadline := time.Now().Add(modelSettleWithin)
	if wake {
		w.wakeRunners(t, deadline)
	}
	for poke := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		var busy []string
		for _, name := range w.cellNames {
			rows, err := w.cellPools[name].Query(w.ctx, sqlModelBusy)
			if err == nil {
				for rows.Next() {
					var s string
					_ = rows.Scan(&s)
					busy = append(busy, s)
				}
				err = rows.Err()
			}
			if err != nil {
				t.Fatalf("list busy ops: %v", err)
			}
		}
		if len(busy) == 0 {
			return
		}
		if time.Now().After(deadline) {
			w.violation(t, "busy: "+strings.Join(busy, ", "),
				"an op neither settled nor waited for a named person within %s", modelSettleWithin)
		}
		if time.Since(poke) > 300*time.Millisecond {
			w.retrySteps(t, time.Time{})
			poke = time.Now()
		}
	}
}

// retrySteps makes every snoozed step runner job (of every cell) that last ran before
// since (zero: any) available now, and returns how many runner jobs have not yet run
// after since.
func (w *modelWorld) retrySteps(t *rapid.T, since time.Time) int {
	left := 0
	for _, name := range w.cellNames {
		left += w.retryStepsIn(t, name, since)
	}
	return left
}

func (w *modelWorld) retryStepsIn(t *rapid.T, cell string, since time.Time) int {
	rows, err := w.cellPools[cell].Query(w.ctx, `SELECT id, state, attempted_at FROM river_job WHERE kind = 'oncebox.steps'
		AND state NOT IN ('completed', 'cancelled', 'discarded')`)
	if err != nil {
		t.Fatalf("list step runners: %v", err)
	}
	type job struct {
		id    int64
		state string
		at    *time.Time
	}
	var jobs []job
	for rows.Next() {
		var j job
		if err := rows.Scan(&j.id, &j.state, &j.at); err != nil {
			t.Fatalf("scan: %v", err)
		}
		jobs = append(jobs, j)
	}
	rows.Close()
	left := 0
	for _, j := range jobs {
		if !since.IsZero() && j.at != nil && j.at.After(since) && j.state != string(rivertype.JobStateRunning) {
			continue
		}
		left++
		if j.state == string(rivertype.JobStateScheduled) || j.state == string(rivertype.JobStateRetryable) {
			if _, err := w.rivercs[cell].JobRetry(w.ctx, j.id); err != nil {
				t.Fatalf("wake step runner %d: %v", j.id, err)
			}
		}
	}
	return left
}

// wakeRunners waits until every step runner has looked at its steps since now.
func (w *modelWorld) wakeRunners(t *rapid.T, deadline time.Time) {
	var now time.Time
	if err := w.pool.QueryRow(w.ctx, `SELECT now()`).Scan(&now); err != nil {
		t.Fatalf("read the clock: %v", err)
	}
	for w.retrySteps(t, now) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after %s a step runner still had not looked at its steps again", modelSettleWithin)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// drain ends a sequence: every runner looks once more, every op settles or waits for a
// named person, and the invariants hold.
func (w *modelWorld) drain(t *rapid.T) {
	w.settle(t, true)
	w.check(t)
}

// accounts lists the accounts the crm target holds, made by oncebox or outside it.
func (w *modelWorld) accounts() []string {
	var out []string
	for _, e := range w.crm.Effects() {
		if e.Path == "/accounts" {
			out = append(out, e.ID)
		}
	}
	return out
}

// owner says whose account id is: the tenant whose op made it, or the tenant an
// operator adopted it for.
func (w *modelWorld) owner(id string) (int, bool) {
	for _, e := range w.crm.Effects() {
		if e.Path != "/accounts" || e.ID != id {
			continue
		}
		if c, ok := w.m.byRef[bodyRef(e.Body)]; ok {
			return c.tenant, true
		}
	}
	tn, ok := w.m.adopted[id]
	return tn, ok
}

// effectOf returns the id of what a target did for op id, if anything.
func (w *modelWorld) effectOf(id string) string {
	for _, f := range []*fakewebhook.Server{w.crm, w.notes} {
		if e := f.EffectsFor(id); len(e) > 0 {
			return e[0].ID
		}
	}
	return ""
}
