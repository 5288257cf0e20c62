package reconcile_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

// countObserver counts the reconciler's decisions and duplicates.
type countObserver struct {
	mu         sync.Mutex
	decisions  map[string]int
	duplicates map[string]int
}

func newCountObserver() *countObserver {
	return &countObserver{decisions: map[string]int{}, duplicates: map[string]int{}}
}

func (o *countObserver) Decision(vendor, decision string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.decisions[vendor+"/"+decision]++
}

func (o *countObserver) Duplicate(vendor string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.duplicates[vendor]++
}

func (o *countObserver) count(m map[string]int, k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return m[k]
}

// sweepEnv is an Outbox, its reconciler's observer and a tenant in a fresh schema.
type sweepEnv struct {
	pool   *pgxpool.Pool
	ob     *outbox.Outbox
	obs    *countObserver
	tenant int64
}

// newSweepEnv builds an Outbox with the given vendors and sweep configuration (not
// started).
func newSweepEnv(t *testing.T, vendors []vendorapi.Vendor, sweep reconcile.Config) *sweepEnv {
	t.Helper()
	return newSweepEnvFrom(t, vendors, outbox.Config{Reconcile: sweep})
}

// newSweepEnvFrom is newSweepEnv with more of the Outbox's configuration (its Logger).
func newSweepEnvFrom(t *testing.T, vendors []vendorapi.Vendor, base outbox.Config) *sweepEnv {
	t.Helper()
	pool := dbtest.Schema(t)
	obs := newCountObserver()
	base.Reconcile.Observer = obs
	ob := optest.NewOutboxFrom(t, pool, base, tools.Config{WebhookTargets: []string{"hooks", "deadhooks"}}, vendors...)
	return &sweepEnv{pool: pool, ob: ob, obs: obs, tenant: optest.Tenant(t, pool, "acme")}
}

// start works the Outbox's jobs until the test ends.
func (e *sweepEnv) start(t *testing.T) {
	t.Helper()
	optest.Start(t, e.ob)
}

func (e *sweepEnv) enqueue(t *testing.T, key, tool string, args any) *outbox.Op {
	t.Helper()
	return optest.Enqueue(t, e.ob, e.tenant, key, tool, args)
}

// seedUnknown records an op as if a worker had sent it ago and then lost the answer
// (optest.SeedUnknown).
func (e *sweepEnv) seedUnknown(t *testing.T, key, tool string, args any, ago time.Duration, staleKey bool) *outbox.Op {
	t.Helper()
	return optest.SeedUnknown(t, e.pool, e.ob, e.tenant, key, tool, args, ago, staleKey)
}

// get reads an op by id.
func (e *sweepEnv) get(t *testing.T, id string) *outbox.Op {
	t.Helper()
	return optest.ByID(t, e.pool, e.ob, e.tenant, id)
}

// waitStatus polls until the op reaches status.
func (e *sweepEnv) waitStatus(t *testing.T, id string, status protocol.Status) *outbox.Op {
	t.Helper()
	return optest.WaitStatus(t, e.pool, e.ob, e.tenant, id, status)
}

// sweep runs one sweep and fails the test on error.
func (e *sweepEnv) sweep(t *testing.T) reconcile.Stats {
	t.Helper()
	st, err := e.ob.ReconcileOnce(context.Background())
	require.NoError(t, err)
	return st
}

// reconcileEvents returns the decisions recorded by the reconciler for an op, in order.
func (e *sweepEnv) reconcileEvents(t *testing.T, id string) []map[string]any {
	t.Helper()
	h, err := e.ob.History(context.Background(), e.tenant, id)
	require.NoError(t, err)
	var out []map[string]any
	for _, ev := range h.Events {
		if ev.Kind != "reconcile" {
			continue
		}
		require.Equal(t, "reconciler", ev.Actor)
		var d map[string]any
		require.NoError(t, json.Unmarshal(ev.Detail, &d))
		d["from"], d["to"] = ev.FromStatus, ev.ToStatus
		out = append(out, d)
	}
	return out
}

func (e *sweepEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return dbtest.Count(t, e.pool, sql, args...)
}

// sqlLiveJobs counts an op's live dispatch jobs.
const sqlLiveJobs = `SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch' AND args->>'op_id' = $1
	AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')`
