package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
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

// chart is a horizontal bar chart, laid out here and drawn as SVG by the template.
type chart struct {
	Height int
	Bars   []bar
}

type bar struct {
	Label string
	Count int64
	// Class colours the bar (the status name, or "tool").
	Class string
	Y     int
	// Width is the bar's length in pixels, of chartWidth.
	Width int
}

// Chart geometry, in SVG pixels.
const (
	chartWidth = 360
	barHeight  = 22
	barGap     = 8
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
		w := 0
		if most > 0 {
			w = max(2, int(counts[l]*chartWidth/most))
		}
		ch.Bars = append(ch.Bars, bar{Label: l, Count: counts[l], Class: class(l), Y: i * (barHeight + barGap), Width: w})
	}
	ch.Height = max(barHeight, len(labels)*(barHeight+barGap))
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
