package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/bench"
	"github.com/oncebox/oncebox/internal/dbtest"
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
	require.Len(t, names, 2*len(sizes.Callers)+3+len(sizes.LatencyWorkers)+4) // enqueue rows, replay, two end-to-end rows, latency rows, peak and three sweeper rows
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
		if strings.HasPrefix(row.Scenario, "enqueue (") {
			require.Equal(t, "≥ 0.8×", row.Target, "row %q", row.Scenario)
			require.NotEqual(t, bench.NoTarget, row.Verdict, "row %q", row.Scenario)
		}
	}
	// Every measured row ends up in the table: no extra rows, none missing.
	require.Equal(t, len(res.Rows), strings.Count(table, "\n| ")-1)
}
