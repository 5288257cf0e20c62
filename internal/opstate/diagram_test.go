package opstate

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
)

var update = flag.Bool("update", false, "rewrite the state diagram of docs/reliability.md from the transition table")

const (
	diagramPath = "../../docs/reliability.md"
	diagramOpen = "<!-- state diagram: generated from internal/opstate's transition table; go test ./internal/opstate -run Diagram -update -->"
	diagramEnd  = "<!-- end of state diagram -->"
)

// diagram renders the transition table as a Mermaid state diagram: one arrow per (from,
// to), labelled with who makes it and when.
func diagram() string {
	var b strings.Builder
	b.WriteString("```mermaid\nstateDiagram-v2\n")
	for _, s := range Initial() {
		fmt.Fprintf(&b, "    [*] --> %s\n", s)
	}
	type edge struct{ from, to protocol.Status }
	var order []edge
	labels := map[edge][]string{}
	for _, t := range transitions {
		e := edge{t.From, t.To}
		if !slices.Contains(order, e) {
			order = append(order, e)
		}
		labels[e] = append(labels[e], fmt.Sprintf("%s, %s", t.By, t.Why))
	}
	for _, e := range order {
		to := string(e.to)
		if e.to == Purged {
			to = "[*]"
		}
		fmt.Fprintf(&b, "    %s --> %s: %s\n", e.from, to, strings.Join(labels[e], " / "))
	}
	b.WriteString("```\n")
	return b.String()
}

// TestDiagramMatchesTable fails when the state diagram of docs/reliability.md is not the
// one the transition table generates (run it with -update to rewrite it).
func TestDiagramMatchesTable(t *testing.T) {
	raw, err := os.ReadFile(diagramPath)
	require.NoError(t, err)
	doc := string(raw)
	start := strings.Index(doc, diagramOpen)
	end := strings.Index(doc, diagramEnd)
	require.True(t, start >= 0 && end > start, "docs/reliability.md has no state diagram between %q and %q", diagramOpen, diagramEnd)
	start += len(diagramOpen) + 1
	want := diagram()
	if *update {
		require.NoError(t, os.WriteFile(diagramPath, []byte(doc[:start]+want+doc[end:]), 0o644))
		return
	}
	require.Equal(t, want, doc[start:end],
		"the state diagram of docs/reliability.md differs from the transition table: go test ./internal/opstate -run Diagram -update")
}

const (
	stepDiagramPath = "../../docs/steps.md"
	stepDiagramOpen = "<!-- step diagram: generated from internal/opstate's step table; go test ./internal/opstate -run Diagram -update -->"
)

// stepDiagram renders the step run's table as a Mermaid state diagram.
func stepDiagram() string {
	var b strings.Builder
	b.WriteString("```mermaid\nstateDiagram-v2\n")
	fmt.Fprintf(&b, "    [*] --> %s\n", StepInitial)
	for _, t := range stepTransitions {
		fmt.Fprintf(&b, "    %s --> %s: %s, %s\n", t.From, t.To, t.By, t.Why)
	}
	b.WriteString("```\n")
	return b.String()
}

// TestStepDiagramMatchesTable fails when the diagram of docs/steps.md is not the one
// the step table generates (run it with -update to rewrite it).
func TestStepDiagramMatchesTable(t *testing.T) {
	raw, err := os.ReadFile(stepDiagramPath)
	require.NoError(t, err)
	doc := string(raw)
	start := strings.Index(doc, stepDiagramOpen)
	end := strings.Index(doc, diagramEnd)
	require.True(t, start >= 0 && end > start, "docs/steps.md has no step diagram between %q and %q", stepDiagramOpen, diagramEnd)
	start += len(stepDiagramOpen) + 1
	want := stepDiagram()
	if *update {
		require.NoError(t, os.WriteFile(stepDiagramPath, []byte(doc[:start]+want+doc[end:]), 0o644))
		return
	}
	require.Equal(t, want, doc[start:end],
		"the step diagram of docs/steps.md differs from the step table: go test ./internal/opstate -run Diagram -update")
}
