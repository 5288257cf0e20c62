//go:build linux

package bench_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/devkit/bench"
)

// costCallers is the caller count of BenchmarkEnqueueCost.
const costCallers = 8

// BenchmarkEnqueueCost says what an enqueue costs rather than how fast it ran on a shared
// machine: the CPU time of this process and of the Postgres backends serving its pool,
// and the WAL written, per op, for oncebox's Go enqueue and River's unique insert at
// costCallers callers, measured in four alternating slices of b.N ops each. Rates on a
// machine shared with other work swing by ±40% between runs; CPU and WAL per op do not
// depend on what else runs, so x_cpu (River's CPU per op ÷ oncebox's) is the ratio an
// idle CPU-bound machine would show. It needs Postgres on this host (it reads the
// backends' /proc/<pid>/stat) and skips otherwise; the WAL figure counts the whole
// cluster's WAL, so it is only meaningful on a cluster nothing else writes to.
func BenchmarkEnqueueCost(b *testing.B) {
	ctx := context.Background()
	s, e := warmEnqueuer(b)
	pids := backendPids(ctx, b, s.Pool)
	if backendCPU(pids) == 0 {
		b.Skip("the Postgres backends' CPU time is not readable here (/proc/<pid>/stat): Postgres runs on another host")
	}
	type cost struct {
		self, backends time.Duration
		wal            int64
		ops            int
	}
	var unique, oncebox cost
	load := bench.Load{Ops: max(b.N/4, 1)}
	b.ResetTimer()
	for range 4 {
		for _, side := range []struct {
			c   *cost
			run func(context.Context, int, bench.Load) (bench.Measure, error)
		}{{&unique, e.RiverUniqueInsert}, {&oncebox, e.Go}} {
			self, backends, wal := processCPU(), backendCPU(pids), walPosition(ctx, b, s.Pool)
			m, err := side.run(ctx, costCallers, load)
			if err != nil {
				b.Fatal(err)
			}
			side.c.self += processCPU() - self
			side.c.backends += backendCPU(pids) - backends
			side.c.wal += walPosition(ctx, b, s.Pool) - wal
			side.c.ops += m.Ops
		}
	}
	b.StopTimer()
	perOp := func(d time.Duration, ops int) float64 { return float64(d.Microseconds()) / float64(ops) }
	b.ReportMetric(perOp(oncebox.self, oncebox.ops), "go_cpu_us/op")
	b.ReportMetric(perOp(oncebox.backends, oncebox.ops), "pg_cpu_us/op")
	b.ReportMetric(float64(oncebox.wal)/float64(oncebox.ops), "wal_bytes/op")
	b.ReportMetric(perOp(unique.self, unique.ops), "unique_go_cpu_us/op")
	b.ReportMetric(perOp(unique.backends, unique.ops), "unique_pg_cpu_us/op")
	b.ReportMetric(float64(unique.wal)/float64(unique.ops), "unique_wal_bytes/op")
	b.ReportMetric(perOp(unique.self+unique.backends, unique.ops)/perOp(oncebox.self+oncebox.backends, oncebox.ops), "x_cpu")
	// Issue 34's ratio: the enqueue's WAL per op over River's unique insert's (≤ 1.5×).
	b.ReportMetric((float64(oncebox.wal)/float64(oncebox.ops))/(float64(unique.wal)/float64(unique.ops)), "wal_x_unique")
}

// warmEnqueuer returns an Enqueuer on a fresh schema for costCallers callers, warmed
// up: every connection of the pool open, every statement of the Go enqueue and of
// River's unique insert prepared.
func warmEnqueuer(b *testing.B) (*bench.Schema, *bench.Enqueuer) {
	b.Helper()
	ctx := context.Background()
	s := newSchema(b, bench.EnqueuePoolSize([]int{costCallers}))
	e, err := bench.NewEnqueuer(ctx, s.Pool)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	warm := bench.Load{Ops: 4 * costCallers}
	if _, err := e.Go(ctx, costCallers, warm); err != nil {
		b.Fatal(err)
	}
	if _, err := e.RiverUniqueInsert(ctx, costCallers, warm); err != nil {
		b.Fatal(err)
	}
	return s, e
}

// backendPids returns the process ids of the backends of every connection the pool holds.
func backendPids(ctx context.Context, b *testing.B, pool *pgxpool.Pool) []int {
	b.Helper()
	var pids []int
	for _, c := range pool.AcquireAllIdle(ctx) {
		var pid int
		err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid)
		c.Release()
		if err != nil {
			b.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// backendCPU sums the user and system CPU time of the processes (0 when unreadable).
func backendCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses: utime and stime are
		// the 12th and 13th, in clock ticks (100 a second on Linux).
		s := string(raw)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// walPosition is the cluster's current WAL position in bytes.
func walPosition(ctx context.Context, b *testing.B, pool *pgxpool.Pool) int64 {
	b.Helper()
	var n int64
	if err := pool.QueryRow(ctx, "SELECT (pg_current_wal_lsn() - '0/0')::bigint").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
