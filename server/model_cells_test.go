package server_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/cells"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestModelCells is TestModel on two cells (docs/scaling.md): the same doors, world and
// invariants, with each process a router over a Server per cell, and one more action,
// moving a tenant to the other cell as `oncebox tenant move` does. So a move meets what
// the model draws around it: ops waiting for a person (decided or resolved in the new
// cell), composite runs (a step waiting for a person holds the move, which must give up
// and leave the tenant where it was), purges and the clock, catalog reloads, restarts,
// adopted accounts, replays and conflicting payloads of keys used before the move.
func TestModelCells(t *testing.T) {
	modelFlags(t)
	env := &modelEnv{pgURL: dbtest.URL(t), cells: true}
	rapid.Check(t, func(rt *rapid.T) {
		w := env.newWorld(rt)
		actions := w.actions()
		actions["move"] = w.stepOf(w.move)
		actions["move again"] = w.stepOf(w.move)
		rt.Repeat(actions)
		w.drain(rt)
	})
}

// modelMoveWait is how long a move waits for a tenant's work in flight: long enough for
// a call whose target answers after modelSlowAnswer, not for what waits for a person.
const modelMoveWait = 3 * time.Second

// move moves a tenant to the other cell (cells.Mover) while its cell seals its audit
// entries often (the worker's sealer runs every 5 s; the model seals at once, as time
// passing would). Now and then the move comes right after a call of the tenant that
// nothing waited for, whose target answers slowly, so that it meets the call's dispatch
// and must wait for it; now and then the old cell's clock moves 3 h and its purge runs
// between the copy and the directory's switch. A move that finds work in flight gives
// up and must leave the tenant where it was, with no fence. Either way both processes'
// directories are waited for, and a moved tenant's MCP session starts over, as a client
// does when its session is not found (HTTP 404).
func (w *modelWorld) move(t *rapid.T) {
	tn := rapid.IntRange(0, 1).Draw(t, "tenant")
	name, from := w.tenants[tn].name, w.cellOf[tn]
	to := map[string]string{cells.Home: "eu", "eu": cells.Home}[from]
	purgeMidway := rapid.Bool().Draw(t, "purge midway")
	if rapid.Bool().Draw(t, "call in flight") {
		// A call of the tenant that nothing waits for, whose target answers slowly: the
		// move meets its dispatch.
		c := &modelCall{ref: w.m.next("c"), tenant: tn, door: "http", tool: "crm.open_account"}
		c.args, c.key = map[string]string{"ref": c.ref}, "k-"+c.ref
		w.m.calls = append(w.m.calls, c)
		w.m.byRef[c.ref] = c
		w.lossy.lose(c.ref, "slow")
		w.send(t, c)
	}
	m := &cells.Mover{Home: w.pool, Cells: w.cellPools, Wait: modelMoveWait, Drain: 3 * w.cfg.CellDirectoryRefresh}
	m.Logf = func(format string, args ...any) {
		t.Logf(format, args...)
		if purgeMidway && format == "copied %s to %s" {
			// Between the copy and the directory's switch, 3 h pass in the old cell and
			// its purge runs: it deletes what the new cell holds as copied.
			w.advanceIn(t, from, 3*time.Hour)
		}
	}
	stopSealing := w.sealing(from)
	_, err := m.Move(w.ctx, name, to)
	stopSealing()
	switch {
	case errors.Is(err, cells.ErrBusy):
		t.Logf("move of %s to %s gave up: %v", name, to, err)
		to = from
	case err != nil:
		t.Fatalf("move %s to %s: %v", name, to, err)
	default:
		w.cellOf[tn] = to
		if s := w.tenants[tn].mcp; s != nil {
			_ = s.Close()
			w.tenants[tn].mcp = nil
		}
	}
	placed, err := cells.Placed(w.ctx, w.pool, name)
	if err != nil {
		t.Fatalf("read the directory: %v", err)
	}
	if placed != (cells.Placement{Cell: to}) {
		w.violation(t, fmt.Sprintf("%s: the directory says %+v after its move to %s", name, placed, to),
			"a tenant's move left the directory placing it elsewhere than where its rows are")
	}
	for _, cell := range w.cellNames {
		var fences int
		if err := w.cellPools[cell].QueryRow(w.ctx, `SELECT count(*) FROM oncebox_tenant_fence`).Scan(&fences); err != nil {
			t.Fatalf("read the fences: %v", err)
		}
		if fences != 0 {
			w.violation(t, fmt.Sprintf("cell %s holds %d fence(s) after a move of %s", cell, fences, name),
				"a move, done or given up, left a fence behind")
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range []*modelProcess{w.api, w.worker} {
		for p.cs.Directory().Lookup(name) != placed {
			if time.Now().After(deadline) {
				t.Fatalf("a process's directory did not place %s in %s within 10 s", name, to)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// sealing seals the cell's audit entries every 50 ms until its stop is called, as the
// worker's sealer does every 5 s: a move waits for them (a round seals only below the
// cluster's oldest running transaction, other tests' too, hence the repeats).
func (w *modelWorld) sealing(cell string) (stop func()) {
	sealer := audit.NewSealer(audit.Config{Pool: w.cellPools[cell]})
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			_, _ = sealer.SealOnce(w.ctx) // an error shows as entries left, which the move reports
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-stopped }
}
