//go:build linux

package bench_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/devkit/bench"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// BenchmarkWAL says where the WAL of an op goes, per relation and record kind
// (pg_walinspect), for a Go enqueue at 8 callers against River's unique insert, and for
// a dispatch at EndToEndWorkers against the floor: each side's bytes per op in River's
// job table and its indexes (river_bytes/op), the op row and its indexes (op_bytes/op),
// the attempt row and its indexes (attempt_bytes/op) and the rest (other_bytes/op:
// commits, MultiXacts, the floor's own table), and the relations of at least 4 bytes
// per op in the log (-v). Like BenchmarkDispatchCost it counts the whole cluster's WAL:
// only meaningful on a cluster nothing else writes to. Skipped without pg_walinspect
// (PostgreSQL 15 and later).
func BenchmarkWAL(b *testing.B) {
	ctx := context.Background()
	b.Run("enqueue", func(b *testing.B) {
		s, e := warmEnqueuer(b)
		load := bench.Load{Ops: max(b.N, 2000)}
		for _, side := range []struct {
			name string
			run  func(context.Context, int, bench.Load) (bench.Measure, error)
		}{{"unique_", e.RiverUniqueInsert}, {"", e.Go}} {
			walPerOp(b, s.Pool, side.name, func() (int, bench.WALMark, error) {
				mark, err := bench.MarkWAL(ctx, s.Pool)
				if err != nil {
					b.Skip(err)
				}
				m, err := side.run(ctx, costCallers, load)
				return m.Ops, mark, err
			})
		}
	})
	b.Run("dispatch", func(b *testing.B) {
		sizes := bench.FullSizes()
		params := bench.DispatchParams{Ops: max(b.N, 3000), Settings: bench.Tuned(sizes.EndToEndWorkers)}
		for _, side := range []struct {
			name string
			run  func(context.Context, *pgxpool.Pool, bench.DispatchParams) (bench.Measure, error)
		}{{"floor_", bench.Floor}, {"", bench.EndToEnd}} {
			s, err := bench.NewSchema(ctx, dbtest.URL(b), bench.DispatchPoolSize)
			if err != nil {
				b.Fatal(err)
			}
			walPerOp(b, s.Pool, side.name, func() (int, bench.WALMark, error) {
				// The ops are in place before the workers start: only their dispatch counts.
				var mark bench.WALMark
				var markErr error
				p := params
				p.BeforeStart = func() { mark, markErr = bench.MarkWAL(ctx, s.Pool) }
				m, err := side.run(ctx, s.Pool, p)
				if markErr != nil {
					b.Skip(markErr)
				}
				return m.Ops, mark, err
			})
			if err := s.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// walPerOp runs run, which returns how many ops it did and the WAL position it started
// from, and reports the WAL per op by group, its metrics named with prefix.
func walPerOp(b *testing.B, pool *pgxpool.Pool, prefix string, run func() (int, bench.WALMark, error)) {
	b.Helper()
	ctx := context.Background()
	ops, mark, err := run()
	if err != nil {
		b.Fatal(err)
	}
	shares, err := bench.WALSince(ctx, pool, mark)
	if err != nil {
		b.Fatal(err)
	}
	groups := map[string]int64{"river": 0, "op": 0, "attempt": 0, "other": 0}
	var lines []string
	for _, s := range shares {
		groups[bench.WALGroup(s.Relation)] += s.Bytes
		if perOp := float64(s.Bytes) / float64(ops); perOp >= 4 {
			lines = append(lines, fmt.Sprintf("%-40s %-22s %5.2f records/op %7.1f bytes/op", s.Relation, s.Kind, float64(s.Records)/float64(ops), perOp))
		}
	}
	var total int64
	for group, bytes := range groups {
		total += bytes
		b.ReportMetric(float64(bytes)/float64(ops), prefix+group+"_bytes/op")
	}
	b.ReportMetric(float64(total)/float64(ops), prefix+"wal_bytes/op")
	b.Logf("%s WAL per op, %d ops, %.0f bytes/op:\n%s", strings.TrimSuffix(prefix, "_")+" (oncebox when empty)", ops,
		float64(total)/float64(ops), strings.Join(lines, "\n"))
}
