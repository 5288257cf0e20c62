package bench_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/oncebox/oncebox/devkit/bench"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// The benchmarks print; they never fail on a missed target. Each reports its own rate
// as "ops/s" and its ratios to the baselines measured inside the same benchmark function
// ("x_river", "x_unique", "x_fresh", "x_floor", "x_peer" or "x_ideal"). For the end-to-end, latency and sweeper
// benchmarks one iteration is a whole scenario, so read ops/s rather than ns/op.

// newSchema returns a fresh migrated schema, dropped when b ends.
func newSchema(b *testing.B, maxConns int32) *bench.Schema {
	b.Helper()
	s, err := bench.NewSchema(context.Background(), dbtest.URL(b), maxConns)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return s
}

// withSchema runs f on a fresh migrated schema and drops it before returning, so that
// an iteration leaves nothing behind.
func withSchema(b *testing.B, maxConns int32, f func(s *bench.Schema) error) {
	b.Helper()
	s, err := bench.NewSchema(context.Background(), dbtest.URL(b), maxConns)
	if err != nil {
		b.Fatal(err)
	}
	err = f(s)
	if cerr := s.Close(context.Background()); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
}

// enqueueCallers are the concurrent caller counts of the enqueue benchmarks.
var enqueueCallers = []int{1, 8, 32}

// BenchmarkEnqueue compares an enqueue (op + River job in one transaction) through the
// Go API and through HTTP (with serve's default group commit, and http_alone without)
// with River's bare InsertTx of one job per transaction (x_river) and with River's
// unique insert, UniqueOpts{ByArgs: true} (x_unique), each run for the same number of
// operations first.
func BenchmarkEnqueue(b *testing.B) {
	ctx := context.Background()
	s := newSchema(b, bench.EnqueuePoolSize(enqueueCallers))
	e, err := bench.NewEnqueuer(ctx, s.Pool)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	apis := []struct {
		name string
		run  func(context.Context, int, bench.Load) (bench.Measure, error)
	}{{"go", e.Go}, {"http", e.HTTP}, {"http_alone", e.HTTPAlone}}
	for _, api := range apis {
		for _, callers := range enqueueCallers {
			b.Run(fmt.Sprintf("api=%s/callers=%d", api.name, callers), func(b *testing.B) {
				b.StopTimer()
				base, err := e.RiverInsert(ctx, callers, bench.Load{Ops: b.N})
				if err != nil {
					b.Fatal(err)
				}
				unique, err := e.RiverUniqueInsert(ctx, callers, bench.Load{Ops: b.N})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				m, err := api.run(ctx, callers, bench.Load{Ops: b.N})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(m.Rate(), "ops/s")
				b.ReportMetric(base.Rate(), "river_ops/s")
				b.ReportMetric(m.Rate()/base.Rate(), "x_river")
				b.ReportMetric(unique.Rate(), "unique_ops/s")
				b.ReportMetric(m.Rate()/unique.Rate(), "x_unique")
			})
		}
	}
}

// BenchmarkReplay compares an enqueue of an existing key (same key, same payload) with
// an enqueue of a fresh key, run for the same number of operations first.
func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	const callers = 8
	s := newSchema(b, bench.EnqueuePoolSize([]int{callers}))
	e, err := bench.NewEnqueuer(ctx, s.Pool)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	// The first Replay enqueues the keys it replays; keep that out of the timings.
	if _, err := e.Replay(ctx, callers, bench.Load{Ops: 1}); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
		b.StopTimer()
		fresh, err := e.Go(ctx, callers, bench.Load{Ops: b.N})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		m, err := e.Replay(ctx, callers, bench.Load{Ops: b.N})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(m.Rate(), "ops/s")
		b.ReportMetric(fresh.Rate(), "fresh_ops/s")
		b.ReportMetric(m.Rate()/fresh.Rate(), "x_fresh")
	})
}

// BenchmarkEndToEnd dispatches 5,000 ops enqueued up front to a zero-latency fake
// webhook receiver and compares, each in a fresh schema with the same worker count, with
// River working 5,000 no-op jobs with the same settings (x_river), with the floor: the
// bare two-commit dispatch written with pgx alone (x_floor), and with the peer: a River
// worker doing the same two commits by hand (x_peer).
func BenchmarkEndToEnd(b *testing.B) {
	ctx := context.Background()
	sizes := bench.FullSizes()
	settings := bench.Tuned(sizes.EndToEndWorkers)
	params := bench.DispatchParams{Ops: sizes.EndToEndOps, Settings: settings}
	for range b.N {
		var base, floor, peer, m bench.Measure
		withSchema(b, bench.DispatchPoolSize, func(s *bench.Schema) (err error) {
			base, err = bench.RiverEndToEnd(ctx, s.Pool, sizes.EndToEndOps, settings)
			return err
		})
		withSchema(b, bench.DispatchPoolSize, func(s *bench.Schema) (err error) {
			floor, err = bench.Floor(ctx, s.Pool, params)
			return err
		})
		withSchema(b, bench.DispatchPoolSize, func(s *bench.Schema) (err error) {
			peer, err = bench.Peer(ctx, s.Pool, params)
			return err
		})
		withSchema(b, bench.DispatchPoolSize, func(s *bench.Schema) (err error) {
			m, err = bench.EndToEnd(ctx, s.Pool, params)
			return err
		})
		b.ReportMetric(m.Rate(), "ops/s")
		b.ReportMetric(base.Rate(), "river_ops/s")
		b.ReportMetric(floor.Rate(), "floor_ops/s")
		b.ReportMetric(peer.Rate(), "peer_ops/s")
		b.ReportMetric(m.Rate()/base.Rate(), "x_river")
		b.ReportMetric(m.Rate()/floor.Rate(), "x_floor")
		b.ReportMetric(m.Rate()/peer.Rate(), "x_peer")
	}
}

// BenchmarkLatency dispatches to a receiver that takes 50 ms per call, at several
// worker counts, and compares with the ideal workers / 50 ms; at 100 workers also with
// the floor at the same latency (x_floor, and the floor's own floor_x_ideal).
func BenchmarkLatency(b *testing.B) {
	ctx := context.Background()
	sizes := bench.FullSizes()
	for _, workers := range sizes.LatencyWorkers {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			for range b.N {
				m, err := bench.Latency(ctx, dbtest.URL(b), workers, sizes.LatencyRounds)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(m.Rate(), "ops/s")
				b.ReportMetric(m.Rate()/bench.IdealLatencyRate(workers), "x_ideal")
				if workers == 100 {
					floor, err := bench.FloorLatency(ctx, dbtest.URL(b), workers, sizes.LatencyRounds)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(floor.Rate(), "floor_ops/s")
					b.ReportMetric(m.Rate()/floor.Rate(), "x_floor")
					b.ReportMetric(floor.Rate()/bench.IdealLatencyRate(workers), "floor_x_ideal")
				}
			}
		})
	}
}

// BenchmarkSweep times ReconcileOnce over 100,000 ops of which 1% are unknown, until all
// are resolved.
func BenchmarkSweep(b *testing.B) {
	ctx := context.Background()
	sizes := bench.FullSizes()
	for range b.N {
		var res bench.SweepResult
		withSchema(b, 8, func(s *bench.Schema) (err error) {
			res, err = bench.Sweep(ctx, s.Pool, bench.SweepParams{Ops: sizes.SweepOps, UnknownEvery: 100})
			return err
		})
		b.ReportMetric(res.Rate(), "ops/s")
		b.ReportMetric(float64(res.PerSweep().Milliseconds()), "ms/sweep")
		b.ReportMetric(float64(res.EmptySweep.Microseconds())/1000, "ms/empty_sweep")
	}
}
