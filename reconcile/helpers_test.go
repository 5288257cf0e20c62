package reconcile_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/optest"
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
	*optest.Env
	obs *countObserver
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
	obs := newCountObserver()
	base.Reconcile.Observer = obs
	return &sweepEnv{Env: optest.NewEnv(t, base, vendors...), obs: obs}
}

// reconcileEvents returns the decisions recorded by the reconciler for an op, in order.
func (e *sweepEnv) reconcileEvents(t *testing.T, id string) []map[string]any {
	t.Helper()
	h, err := e.Ob.History(context.Background(), e.Tenant, id)
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

// sqlLiveJobs counts an op's live dispatch jobs.
const sqlLiveJobs = `SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch' AND args->>'op_id' = $1
	AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')`
