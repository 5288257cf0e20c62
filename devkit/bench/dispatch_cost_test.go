//go:build linux

package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/devkit/bench"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// BenchmarkDispatchCost says what a dispatch costs rather than how fast it ran on a
// shared machine, as BenchmarkEnqueueCost does for an enqueue: the CPU time of this
// process and of the Postgres backends serving the pool, and the WAL written, per op,
// from the start of the workers until every op is recorded (the ops are in place
// before), for oncebox's default (clean runs, batched completion), oncebox with
// --claim-commit and --batched-completion=false (as before clean runs), the peer and
// the floor, EndToEndOps each at EndToEndWorkers, in two alternating rounds. The WAL
// figure counts the whole cluster's WAL: only meaningful on a cluster nothing else
// writes to. The process CPU includes the fake receiver's.
func BenchmarkDispatchCost(b *testing.B) {
	ctx := context.Background()
	sizes := bench.FullSizes()
	params := bench.DispatchParams{Ops: sizes.EndToEndOps, Settings: bench.Tuned(sizes.EndToEndWorkers)}
	before := params
	before.ClaimCommit, before.CompleteInTx = true, true
	type cost struct {
		self, backends time.Duration
		wal            int64
		ops            int
	}
	sides := []struct {
		name string
		c    cost
		run  func(context.Context, *pgxpool.Pool, bench.DispatchParams) (bench.Measure, error)
		p    bench.DispatchParams
	}{
		{name: "", run: bench.EndToEnd, p: params},
		{name: "before_", run: bench.EndToEnd, p: before},
		{name: "peer_", run: bench.Peer, p: params},
		{name: "floor_", run: bench.Floor, p: params},
	}
	for range 2 {
		for i := range sides {
			side := &sides[i]
			s, err := bench.NewSchema(ctx, dbtest.URL(b), bench.DispatchPoolSize)
			if err != nil {
				b.Fatal(err)
			}
			// Open every connection of the pool first, so that its backends are known.
			conns := make([]*pgxpool.Conn, 0, bench.DispatchPoolSize)
			for range bench.DispatchPoolSize {
				c, err := s.Pool.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				conns = append(conns, c)
			}
			for _, c := range conns {
				c.Release()
			}
			pids := backendPids(ctx, b, s.Pool)
			if backendCPU(pids) == 0 {
				b.Skip("the Postgres backends' CPU time is not readable here (/proc/<pid>/stat): Postgres runs on another host")
			}
			var self, backends time.Duration
			var wal int64
			p := side.p
			p.BeforeStart = func() { self, backends, wal = processCPU(), backendCPU(pids), walPosition(ctx, b, s.Pool) }
			m, err := side.run(ctx, s.Pool, p)
			if err != nil {
				b.Fatal(err)
			}
			side.c.self += processCPU() - self
			side.c.backends += backendCPU(pids) - backends
			side.c.wal += walPosition(ctx, b, s.Pool) - wal
			side.c.ops += m.Ops
			if err := s.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	perOp := func(d time.Duration, ops int) float64 { return float64(d.Microseconds()) / float64(ops) }
	cpu := func(c cost) float64 { return perOp(c.self+c.backends, c.ops) }
	wal := func(c cost) float64 { return float64(c.wal) / float64(c.ops) }
	for _, side := range sides {
		b.ReportMetric(perOp(side.c.self, side.c.ops), side.name+"go_cpu_us/op")
		b.ReportMetric(perOp(side.c.backends, side.c.ops), side.name+"pg_cpu_us/op")
		b.ReportMetric(wal(side.c), side.name+"wal_bytes/op")
	}
	// The ratios issue 34 sets targets for: oncebox's default against the floor (CPU ≤
	// 1.3×, WAL ≤ 2.5×), and against the peer.
	oncebox, peer, floor := sides[0].c, sides[2].c, sides[3].c
	b.ReportMetric(cpu(oncebox)/cpu(floor), "cpu_x_floor")
	b.ReportMetric(wal(oncebox)/wal(floor), "wal_x_floor")
	b.ReportMetric(cpu(oncebox)/cpu(peer), "cpu_x_peer")
	b.ReportMetric(wal(oncebox)/wal(peer), "wal_x_peer")
}
