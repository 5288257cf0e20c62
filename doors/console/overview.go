package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/oncebox/oncebox/protocol"
)

// overviewView is the overview page: the last 24 h in two bar charts and the counts
// that wait for a person.
type overviewView struct {
	Since       time.Time
	Total       int64
	ByStatus    chart
	ByTool      chart
	NeedsReview int64
	Waiting     int64
	// Replays is -1 when unknown.
	Replays int64
}

// chart is a horizontal bar chart, laid out here and drawn as SVG by the template at
// the width of its box, without scaling: each bar has its label on a line of its own
// above it and a length in percent of the width, so that the text keeps its size on a
// phone and on a laptop.
type chart struct {
	Height int
	Bars   []bar
}

type bar struct {
	// Label is the label as shown: one longer than maxLabel runes is cut, ending
	// in "…", and Full (its SVG title) is the whole of it.
	Label, Full string
	Count       int64
	// Class colours the bar (the status name, or "tool").
	Class string
	// LabelY, BarY and CountY are the baselines of the label and the count and the
	// top of the bar, in pixels from the chart's top.
	LabelY, BarY, CountY int
	// Share is the bar's length, in percent of the chart's width, at most maxShare
	// (the rest is for the count).
	Share string
}

// Chart geometry, in pixels (the SVG is not scaled), and the longest label shown
// whole: 40 characters of 13 px monospace fit the 324 px a 390 px phone leaves.
const (
	labelLine = 18
	barHeight = 14
	barGap    = 10
	maxShare  = 80.0
	maxLabel  = 40
)

func layoutChart(counts map[string]int64, class func(string) string) chart {
	labels := make([]string, 0, len(counts))
	var most int64
	for l, n := range counts {
		labels = append(labels, l)
		most = max(most, n)
	}
	slices.SortFunc(labels, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	ch := chart{}
	for i, l := range labels {
		share := 0.0
		if most > 0 {
			share = max(1, float64(counts[l])*maxShare/float64(most))
		}
		shown := l
		if r := []rune(l); len(r) > maxLabel {
			shown = string(r[:maxLabel-1]) + "…"
		}
		y := i * (labelLine + barHeight + barGap)
		ch.Bars = append(ch.Bars, bar{Label: shown, Full: l, Count: counts[l], Class: class(l),
			LabelY: y + 13, BarY: y + labelLine, CountY: y + labelLine + 12, Share: strconv.FormatFloat(share, 'f', 1, 64)})
	}
	ch.Height = max(barHeight, len(labels)*(labelLine+barHeight+barGap)-barGap+4)
	return ch
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	v := c.viewFor(s, "overview")
	v.Title = "Overview"
	ov := &overviewView{Since: c.cfg.Now().Add(-24 * time.Hour), Replays: -1}
	v.Overview = ov
	rows, err := c.cfg.Pool.Query(r.Context(), sqlStatusCounts, s.principal.ID, ov.Since)
	if err != nil {
		c.internal(w, r, v, fmt.Errorf("console: count ops: %w", err))
		return
	}
	byStatus, byTool := map[string]int64{}, map[string]int64{}
	for rows.Next() {
		var (
			tool, status string
			n            int64
		)
		if err := rows.Scan(&tool, &status, &n); err != nil {
			rows.Close()
			c.internal(w, r, v, fmt.Errorf("console: count ops: %w", err))
			return
		}
		byStatus[status] += n
		byTool[tool] += n
		ov.Total += n
	}
	if err := rows.Err(); err != nil {
		c.internal(w, r, v, fmt.Errorf("console: count ops: %w", err))
		return
	}
	ov.ByStatus = layoutChart(byStatus, func(s string) string {
		switch protocol.Status(s) {
		case protocol.StatusSucceeded:
			return "ok"
		case protocol.StatusFailed, protocol.StatusRejected:
			return "bad"
		case protocol.StatusNeedsReview, protocol.StatusUnknown, protocol.StatusAwaitingApproval:
			return "person"
		}
		return "busy"
	})
	ov.ByTool = layoutChart(byTool, func(string) string { return "tool" })
	if err := c.cfg.Pool.QueryRow(r.Context(), sqlOpenCounts, s.principal.ID).Scan(&ov.NeedsReview, &ov.Waiting); err != nil {
		c.internal(w, r, v, fmt.Errorf("console: count open ops: %w", err))
		return
	}
	if c.cfg.Replays != nil {
		ov.Replays = c.cfg.Replays(s.principal.ID)
	}
	c.render(w, r, http.StatusOK, "overview", v)
}
