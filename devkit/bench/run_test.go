package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/bench"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestRunQuick runs every scenario at a tiny size and checks that the table has every
// row, so that `oncebox bench` cannot rot. It asserts nothing about speed.
func TestRunQuick(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs every benchmark scenario (about 10 s); skipped with -short")
	}
	sizes := bench.Sizes{
		EnqueueDuration:   100 * time.Millisecond,
		Callers:           []int{1, 4},
		ReplayCallers:     4,
		EndToEndOps:       100,
		EndToEndWorkers:   20,
		LatencyWorkers:    []int{5, 10},
		MaxLatencyWorkers: 10,
		LatencyRounds:     3,
		SweepOps:          1000,
	}
	var out, progress bytes.Buffer
	res, err := bench.Run(context.Background(), bench.Config{DatabaseURL: dbtest.URL(t), Sizes: &sizes, Out: &out, Progress: &progress})
	require.NoError(t, err, progress.String())

	table := out.String()
	require.True(t, strings.HasPrefix(table, "| scenario | oncebox rate | baseline | baseline rate | ratio | target | met? |\n"), table)
	require.Contains(t, table, "\nMachine: ")
	require.Contains(t, table, "PostgreSQL ")

	names := bench.Scenarios(sizes)
	require.Len(t, names, 3*len(sizes.Callers)+10+len(sizes.LatencyWorkers)+6) // enqueue rows (Go, HTTP, unique), replay, seven end-to-end rows (the default against River, the floor and the peer; --batched-completion=false against the floor and the peer; the default against --claim-commit, --claim-commit against the peer), two tracing rows, latency rows, latency against the floor, peak, monotonic and three sweeper rows
	for _, name := range names {
		row, ok := res.Row(name)
		require.True(t, ok, "no row %q in\n%s", name, table)
		require.Contains(t, table, "| "+name+" | ", "row %q is not printed", name)
		require.Positive(t, row.Rate, "row %q", name)
		if row.Baseline != "" {
			require.Positive(t, row.BaselineRate, "row %q", name)
			require.InDelta(t, row.Rate/row.BaselineRate, row.Ratio, 1e-9, "row %q", name)
		}
	}
	for _, row := range res.Rows {
		if strings.HasSuffix(row.Scenario, ", against River unique insert") {
			require.Equal(t, "≥ 0.8×", row.Target, "row %q", row.Scenario)
			require.Contains(t, row.Baseline, "UniqueOpts{ByArgs: true}")
		}
		if strings.HasSuffix(row.Scenario, "zero-latency webhook, against the floor") {
			require.Equal(t, "≥ 0.6×", row.Target, "row %q", row.Scenario)
			require.True(t, strings.HasPrefix(row.Baseline, "floor: "), row.Baseline)
		}
		if strings.HasSuffix(row.Scenario, ", against the peer") {
			require.Equal(t, "≥ 1.5×", row.Target, "row %q", row.Scenario)
			require.True(t, strings.HasPrefix(row.Baseline, "peer: "), row.Baseline)
		}
		if row.Target != "" {
			require.NotEqual(t, bench.NoTarget, row.Verdict, "row %q", row.Scenario)
		}
	}
	require.Contains(t, table, "against the floor | ")
	require.Contains(t, table, "against the peer | ")
	require.Contains(t, table, "throughput as workers are added | ")
	// Every measured row ends up in the table: no extra rows, none missing.
	require.Equal(t, len(res.Rows), strings.Count(table, "\n| ")-1)
}
