package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// recoveryTarget is the promise of issue 28: with default settings, an op in flight on
// a serve process that is SIGKILLed settles within this long of the kill.
const recoveryTarget = 20 * time.Second

// TestSIGKILLSettlesWithin20sOnRestart: a serve worker with default settings is
// SIGKILLed after the catalog target acted and before its answer was heard, and is
// started again: the new process proves the old one gone (its liveness lock is free),
// takes the job over and hands the op to the reconciler at once, which settles it from
// the target's own record within 20 s of the kill, with one effect.
func TestSIGKILLSettlesWithin20sOnRestart(t *testing.T) {
	testSIGKILLSettles(t, false)
}

// TestSIGKILLSettlesWithin20sByAnotherServe: the same with a second serve process,
// alive all along and never restarted: it takes the dead one's job over.
func TestSIGKILLSettlesWithin20sByAnotherServe(t *testing.T) {
	testSIGKILLSettles(t, true)
}

func testSIGKILLSettles(t *testing.T, other bool) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	conn := dbtest.ConnString(t, pool)
	crm := newBlockedCRM(t)
	api, tn := crm.apiProcess(t, pool, nil)
	waitPostgresSettled(t, pool)

	// Default settings: only what the test needs to run (its database and catalog).
	workerArgs := "serve --database-url " + conn + " --tools-file " + crm.toolsFile + " --roles worker,periodic"
	first, _ := startChild(t, workerArgs)
	res, err := api.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "lead-1", Tool: "crm.create_lead",
		Args: json.RawMessage(`{"name":"Ada"}`)})
	require.NoError(t, err)
	crm.waitActed(t)
	if other {
		// The other serve starts once the first holds the op's job, and stays up.
		startChild(t, workerArgs)
		time.Sleep(2 * time.Second)
	}
	killedAt := time.Now()
	crm.kill(t, first)
	if !other {
		startChild(t, workerArgs)
	}

	var op *outbox.Op
	require.Eventually(t, func() bool {
		op, err = api.Outbox().Get(ctx, tn.ID, "lead-1")
		return err == nil && op.Status == protocol.StatusSucceeded
	}, recoveryTarget, 100*time.Millisecond, "not settled within %s of the SIGKILL: op %+v", recoveryTarget, op)
	t.Logf("settled %s after the SIGKILL", time.Since(killedAt).Round(10*time.Millisecond))
	require.Equal(t, 1, crm.fake.EffectCount(), "one object at the target")
	require.Len(t, crm.fake.EffectsFor(res.Op.ID), 1)
	require.Equal(t, crm.fake.EffectsFor(res.Op.ID)[0].ID, op.VendorRef, "settled from the target's own record")
}

// TestTimeToSettleAfterSIGKILL measures the time from a SIGKILL of a serve process with
// default settings, holding settleOps ops in flight at a catalog target that acted on
// each, to the settlement of each op once the process is started again: p50 and p99,
// with and without the target's native keys (a resend under the same key, or the
// reconciler from the target's own record). Every op ends with one object at the target,
// and p99 stays under the 20 s target. BenchmarkTimeToSettleAfterSIGKILL (make bench)
// reports the same figures.
func TestTimeToSettleAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	for _, native := range []bool{true, false} {
		t.Run(settleName(native), func(t *testing.T) {
			s := timeToSettle(t, native)
			t.Logf("time to settle after SIGKILL, native_keys=%t, %d ops in flight: p50 %s, p99 %s, max %s", native, settleOps,
				s.p50.Round(10*time.Millisecond), s.p99.Round(10*time.Millisecond), s.max.Round(10*time.Millisecond))
			require.Less(t, s.p99, recoveryTarget)
		})
	}
}

// BenchmarkTimeToSettleAfterSIGKILL is TestTimeToSettleAfterSIGKILL as a benchmark:
// each iteration kills a serve process holding settleOps ops in flight and starts it
// again, and the benchmark reports the p50, p99 and max time from the kill to an op's
// settlement over every op of every iteration (p50_s, p99_s, max_s), with and without
// native keys. make bench runs it once (-benchtime 1x): an iteration takes seconds.
func BenchmarkTimeToSettleAfterSIGKILL(b *testing.B) {
	for _, native := range []bool{true, false} {
		b.Run(settleName(native), func(b *testing.B) {
			var all []time.Duration
			for b.Loop() {
				all = append(all, timeToSettle(b, native).all...)
			}
			s := settleFigures(all)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(s.p50.Seconds(), "p50_s")
			b.ReportMetric(s.p99.Seconds(), "p99_s")
			b.ReportMetric(s.max.Seconds(), "max_s")
			b.ReportMetric(float64(len(all)), "ops_killed")
		})
	}
}

func settleName(native bool) string {
	if native {
		return "native_keys"
	}
	return "no_native_keys"
}

// settleOps is how many ops are in flight when the process is killed.
const settleOps = 50

// settleTimes are the times from a SIGKILL to each op's settlement, sorted, with their
// p50, p99 and max.
type settleTimes struct {
	all           []time.Duration
	p50, p99, max time.Duration
}

func settleFigures(all []time.Duration) settleTimes {
	slices.Sort(all)
	return settleTimes{all: all, p50: all[len(all)/2], p99: all[(len(all)*99+99)/100-1], max: all[len(all)-1]}
}

// timeToSettle kills a serve worker with default settings while it holds settleOps ops
// at a catalog target that acted on each, starts it again, and returns the time from
// the kill to each op's settlement. It fails tb unless every op succeeds with one object
// at the target.
func timeToSettle(tb testing.TB, native bool) settleTimes {
	ctx := context.Background()
	pool := dbtest.Schema(tb)
	conn := dbtest.ConnString(tb, pool)
	fake := fakewebhook.New(fakewebhook.Config{HonourKeys: native})
	release := make(chan struct{})
	fake.SetBlock(release)
	target := httptest.NewServer(fake)
	tb.Cleanup(target.Close)
	crm := &blockedCRM{fake: fake, toolsFile: writeTools(tb, crmCatalog(target.URL, native)), release: release}
	api, tn := crm.apiProcess(tb, pool, nil)
	waitPostgresSettled(tb, pool)

	workerArgs := "serve --database-url " + conn + " --tools-file " + crm.toolsFile + " --roles worker,periodic"
	first, _ := startChild(tb, workerArgs)
	ids := make(map[string]string, settleOps)
	for i := range settleOps {
		key := fmt.Sprintf("lead-%d", i)
		res, err := api.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: key, Tool: "crm.create_lead",
			Args: json.RawMessage(fmt.Sprintf(`{"name":"Ada %d"}`, i))})
		require.NoError(tb, err)
		ids[key] = res.Op.ID
	}
	require.Eventually(tb, func() bool { return fake.EffectCount() == settleOps }, 30*time.Second, 20*time.Millisecond,
		"the target acted on %d of %d ops", fake.EffectCount(), settleOps)
	killedAt := time.Now()
	require.NoError(tb, first.Process.Signal(syscall.SIGKILL))
	_, _ = first.Process.Wait()
	fake.SetBlock(nil)
	close(release)
	startChild(tb, workerArgs)

	took := make(map[string]time.Duration, settleOps)
	require.Eventually(tb, func() bool {
		for key := range ids {
			if _, ok := took[key]; ok {
				continue
			}
			op, err := api.Outbox().Get(ctx, tn.ID, key)
			if err == nil && op.Status == protocol.StatusSucceeded {
				took[key] = time.Since(killedAt)
			}
		}
		return len(took) == settleOps
	}, time.Minute, 50*time.Millisecond, "%d of %d ops settled (lead-0: %s)", len(took), settleOps, opState(tb, pool, ids["lead-0"]))
	require.Equal(tb, settleOps, fake.EffectCount(), "one object per op at the target")
	for _, id := range ids {
		require.Len(tb, fake.EffectsFor(id), 1)
	}
	all := make([]time.Duration, 0, settleOps)
	for _, d := range took {
		all = append(all, d)
	}
	return settleFigures(all)
}

// opState describes an op for a failure message: its status, attempts and events.
func opState(t testing.TB, pool *pgxpool.Pool, opID string) string {
	var s string
	err := pool.QueryRow(context.Background(), `SELECT o.status || ' attempts=' || o.attempts || ' ' ||
		coalesce((SELECT string_agg(coalesce(a.outcome, 'open') || ':' || coalesce(a.error, ''), '; ') FROM oncebox_attempt a WHERE a.op_id = o.id), '') || ' jobs=' ||
		coalesce((SELECT string_agg(j.state || '@' || j.attempt || ' by ' || coalesce(j.attempted_by[cardinality(j.attempted_by)], '-') || ' at ' || coalesce(j.attempted_at::text, '-') || ' pg_start ' || pg_postmaster_start_time()::text || ' locks ' || (SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.classid = ((hashtextextended('oncebox.process:' || j.attempted_by[cardinality(j.attempted_by)], 0) >> 32) & 4294967295)::oid) || ' ' || coalesce(j.errors[cardinality(j.errors)]->>'error', ''), '; ') FROM river_job j WHERE j.args->>'op_id' = o.id::text), '')
		FROM oncebox_op o WHERE o.id = $1`, opID).Scan(&s)
	if err != nil {
		return err.Error()
	}
	return s
}

// waitPostgresSettled waits until Postgres has run for more than the liveness margin
// (5 s; see docs/reliability.md, Recovery): the liveness lock of a process proves
// nothing about a job fetched sooner after Postgres's start, and the test's private
// cluster may have just started.
func waitPostgresSettled(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	var left float64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT extract(epoch FROM pg_postmaster_start_time() + interval '6 seconds' - now())::float8`).Scan(&left))
	if left > 0 {
		time.Sleep(time.Duration(left * float64(time.Second)))
	}
}
