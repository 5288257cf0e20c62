package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Verdict says whether a row met its target.
type Verdict int

// The verdicts.
const (
	// NoTarget marks a row that only informs.
	NoTarget Verdict = iota
	// Met marks a row that reached its target.
	Met
	// Missed marks a row that fell short of its target.
	Missed
)

// String returns "yes", "no" or "—".
func (v Verdict) String() string {
	switch v {
	case Met:
		return "yes"
	case Missed:
		return "no"
	}
	return "—"
}

// Row is one line of the results table.
type Row struct {
	// Scenario names what oncebox did.
	Scenario string
	// Rate is oncebox's figure, in Unit.
	Rate float64
	// Unit is "ops/s", "ms" or "×" (a ratio of two rates of this run).
	Unit string
	// Baseline names what oncebox is compared with; empty when nothing is.
	Baseline string
	// BaselineRate is the baseline's figure, in Unit.
	BaselineRate float64
	// Ratio is Rate / BaselineRate; 0 when there is no baseline.
	Ratio float64
	// Target says what Ratio (or Rate) should reach, such as "≥ 0.8×"; empty for none.
	Target string
	// Verdict says whether the target was reached.
	Verdict Verdict
}

// Machine describes where the run happened.
type Machine struct {
	// CPUs is runtime.NumCPU().
	CPUs int
	// Postgres is the server's SHOW server_version.
	Postgres string
	// Go is runtime.Version() with GOOS/GOARCH.
	Go string
}

// String returns the one-line description printed under the table.
func (m Machine) String() string {
	return fmt.Sprintf("Machine: %d CPUs (runtime.NumCPU), PostgreSQL %s, %s.", m.CPUs, m.Postgres, m.Go)
}

// Results is what Run measured.
type Results struct {
	// Machine is where it ran.
	Machine Machine
	// Rows are the table's lines, in order.
	Rows []Row
}

// Row returns the row with the given scenario name.
func (r *Results) Row(scenario string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Scenario == scenario {
			return row, true
		}
	}
	return Row{}, false
}

// Missed returns the rows that missed their target.
func (r *Results) Missed() []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Verdict == Missed {
			out = append(out, row)
		}
	}
	return out
}

// WriteMarkdown writes the results as one Markdown table followed by the machine line.
func (r *Results) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| scenario | oncebox rate | baseline | baseline rate | ratio | target | met? |\n")
	b.WriteString("| --- | ---: | --- | ---: | ---: | --- | --- |\n")
	for _, row := range r.Rows {
		baseline, baseRate, ratio := "—", "—", "—"
		if row.Baseline != "" {
			baseline = row.Baseline
			baseRate = formatFigure(row.BaselineRate, row.Unit)
			ratio = strconv.FormatFloat(row.Ratio, 'f', 2, 64) + "×"
		}
		target := row.Target
		if target == "" {
			target = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n",
			row.Scenario, formatFigure(row.Rate, row.Unit), baseline, baseRate, ratio, target, row.Verdict)
	}
	b.WriteString("\n" + r.Machine.String() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// formatFigure prints a figure with its unit: thousands separated, one decimal below 100;
// a ratio ("×") with two decimals.
func formatFigure(x float64, unit string) string {
	if unit == "×" {
		return strconv.FormatFloat(x, 'f', 2, 64) + "×"
	}
	if x < 100 {
		return strconv.FormatFloat(x, 'f', 1, 64) + " " + unit
	}
	return groupThousands(int64(math.Round(x))) + " " + unit
}

// groupThousands writes n with commas between groups of three digits.
func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// ratioRow builds a row compared with a baseline and a minimum ratio.
func ratioRow(scenario string, m Measure, baseline string, base Measure, minRatio float64) Row {
	row := Row{Scenario: scenario, Rate: m.Rate(), Unit: "ops/s", Baseline: baseline, BaselineRate: base.Rate()}
	if row.BaselineRate > 0 {
		row.Ratio = row.Rate / row.BaselineRate
	}
	if minRatio > 0 {
		row.Target = "≥ " + strconv.FormatFloat(minRatio, 'f', -1, 64) + "×"
		row.Verdict = Missed
		if row.Ratio >= minRatio {
			row.Verdict = Met
		}
	}
	return row
}
