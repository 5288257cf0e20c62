package console

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/internal/money"
	"github.com/oncebox/oncebox/internal/storable"
	"github.com/oncebox/oncebox/protocol"
)

// Audit page bounds: the default window reaches this far back, and the page shows at
// most auditListed entries (the downloads stream every entry of the window).
const (
	auditDefaultWindow = 7 * 24 * time.Hour
	auditListed        = 500
)

// auditOutcomes are the op statuses the Audit page's outcome filter offers.
var auditOutcomes = []string{string(protocol.StatusAwaitingApproval), string(protocol.StatusRejected), string(protocol.StatusPending),
	string(protocol.StatusDispatching), string(protocol.StatusSucceeded), string(protocol.StatusFailed), string(protocol.StatusUnknown),
	string(protocol.StatusNeedsReview)}

// auditForm is the Audit page's filters as the person typed them, shown back in the
// form and carried by the download links.
type auditForm struct {
	Since, Until, Tool, Person, Outcome, MinAmount, MaxAmount string
}

// query is the form as a URL query, for the download links.
func (f *auditForm) query() string {
	q := url.Values{}
	for _, kv := range [][2]string{{"since", f.Since}, {"until", f.Until}, {"tool", f.Tool}, {"person", f.Person},
		{"outcome", f.Outcome}, {"min_amount", f.MinAmount}, {"max_amount", f.MaxAmount}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	return q.Encode()
}

// auditView is the Audit page: its filters, the entries they select and whether more
// entries exist than the page shows.
type auditView struct {
	Form      auditForm
	Outcomes  []string
	Entries   []auditRow
	More      bool
	Listed    int
	CSV, JSON string
}

// auditRow is one audit entry as the page shows it: the short fields of its kind.
type auditRow struct {
	Seq              int64
	At               time.Time
	Kind, What, OpID string
	// OpShort is the op id as the table shows it: its first 8 characters.
	OpShort                string
	Who, Tool, Status, Ref string
	Amount, Detail         string
	Sealed                 bool
}

// auditParams reads the Audit page's filters: since and until as dates (YYYY-MM-DD, the
// whole day: until's day is included) or RFC 3339 times, by default the last 7 days; the
// tool, the person, an op status; amounts in whole minor units. A bad value is a refusal.
func (c *Console) auditParams(r *http.Request, tenantID int64) (audit.ExportParams, auditForm, *refusal) {
	q := r.URL.Query()
	f := auditForm{Since: strings.TrimSpace(q.Get("since")), Until: strings.TrimSpace(q.Get("until")), Tool: strings.TrimSpace(q.Get("tool")),
		Person: strings.TrimSpace(q.Get("person")), Outcome: q.Get("outcome"), MinAmount: strings.TrimSpace(q.Get("min_amount")),
		MaxAmount: strings.TrimSpace(q.Get("max_amount"))}
	now := c.cfg.Now().UTC()
	p := audit.ExportParams{TenantID: tenantID, Tool: f.Tool, Person: f.Person, Outcome: f.Outcome,
		Since: now.Add(-auditDefaultWindow).Truncate(24 * time.Hour), Until: now.Add(time.Minute)}
	if f.Since == "" {
		f.Since = p.Since.Format(time.DateOnly)
	}
	bad := func(format string, a ...any) (audit.ExportParams, auditForm, *refusal) {
		return p, f, &refusal{Type: protocol.ProblemInvalidRequest, Sentence: fmt.Sprintf(format, a...)}
	}
	var err error
	if p.Since, err = parseDay(f.Since, false); err != nil {
		return bad("The start %q is not a date (YYYY-MM-DD) or an RFC 3339 time.", f.Since)
	}
	if f.Until != "" {
		if p.Until, err = parseDay(f.Until, true); err != nil {
			return bad("The end %q is not a date (YYYY-MM-DD) or an RFC 3339 time.", f.Until)
		}
	}
	if !p.Since.Before(p.Until) {
		return bad("The start %s is not before the end %s.", p.Since.Format(time.RFC3339), p.Until.Format(time.RFC3339))
	}
	for _, t := range [][2]string{{"tool", f.Tool}, {"person", f.Person}} {
		if len(t[1]) > 255 || storable.CheckText(t[0], t[1]) != nil {
			return bad("The %s filter must be at most 255 characters of text.", t[0])
		}
	}
	if f.Outcome != "" && !slices.Contains(auditOutcomes, f.Outcome) {
		return bad("The outcome %q is not an op status; choose one of the list.", f.Outcome)
	}
	for _, a := range []struct {
		name, raw string
		to        **int64
	}{{"minimum amount", f.MinAmount, &p.MinAmount}, {"maximum amount", f.MaxAmount, &p.MaxAmount}} {
		if a.raw == "" {
			continue
		}
		n, err := strconv.ParseInt(a.raw, 10, 64)
		if err != nil || n < 0 {
			return bad("The %s %q is not a whole number of minor units (cents for USD: 2000 for $20.00).", a.name, a.raw)
		}
		*a.to = &n
	}
	if p.MinAmount != nil && p.MaxAmount != nil && *p.MinAmount > *p.MaxAmount {
		return bad("The minimum amount %d is above the maximum %d.", *p.MinAmount, *p.MaxAmount)
	}
	return p, f, nil
}

// parseDay reads RFC 3339 or a date: its midnight UTC, or for an end (end set) the
// next midnight, so that the day is included.
func parseDay(s string, end bool) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.DateOnly, s)
	if err == nil && end {
		t = t.AddDate(0, 0, 1)
	}
	return t, err
}

// auditPage is the Audit page: the filters, and the entries of the tenant's audit log
// they select, in the log's order, at most auditListed of them.
func (c *Console) auditPage(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	v := c.viewFor(s, "audit")
	v.Title = "Audit"
	p, f, bad := c.auditParams(r, s.principal.ID)
	av := &auditView{Form: f, Outcomes: auditOutcomes}
	v.Audit = av
	if bad != nil {
		v.Error = bad
		c.render(w, r, http.StatusBadRequest, "audit", v)
		return
	}
	av.CSV, av.JSON = "/console/audit.csv?"+f.query(), "/console/audit.jsonl?"+f.query()
	tokens, err := c.askers(r, s)
	if err != nil {
		c.internal(w, r, v, err)
		return
	}
	p.Limit = auditListed + 1
	err = audit.Export(r.Context(), c.cfg.Pool, p, func(e *audit.Entry) error {
		if len(av.Entries) == auditListed {
			av.More = true
			return nil
		}
		av.Entries = append(av.Entries, auditRowOf(e, tokens))
		return nil
	})
	if err != nil {
		c.internal(w, r, v, err)
		return
	}
	av.Listed = len(av.Entries)
	c.render(w, r, http.StatusOK, "audit", v)
}

// auditDownload streams the entries the Audit page's filters select, every one of the
// window, as audit.csv or audit.jsonl: `oncebox audit export`'s formats. At most
// Config.AuditDownloads stream at once.
func (c *Console) auditDownload(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	format := "csv"
	if strings.HasSuffix(r.URL.Path, ".jsonl") {
		format = "jsonl"
	}
	p, _, bad := c.auditParams(r, s.principal.ID)
	if bad != nil {
		c.refuse(w, r, c.viewFor(s, "audit"), http.StatusBadRequest, bad.Type, bad.Sentence)
		return
	}
	if !c.cfg.AuditDownloads.TryAcquire() {
		w.Header().Set("Retry-After", "5")
		c.refuse(w, r, c.viewFor(s, "audit"), http.StatusTooManyRequests, protocol.ProblemTooManyExports, fmt.Sprintf(
			"%d audit downloads and exports are already streaming from this server, each on a database connection; try again in a few seconds, or narrow the window.",
			c.cfg.AuditDownloads.Cap()))
		return
	}
	defer c.cfg.AuditDownloads.Release()
	h := w.Header()
	h.Set("Content-Type", audit.ContentType(format))
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="oncebox-audit-%s-%s.%s"`,
		p.Since.UTC().Format("20060102T150405Z"), p.Until.UTC().Format("20060102T150405Z"), format))
	started, err := audit.ExportHTTP(r.Context(), w, c.cfg.Pool, p, format)
	if err == nil {
		return
	}
	if !started {
		h.Del("Content-Disposition")
		c.internal(w, r, c.viewFor(s, "audit"), err)
		return
	}
	// Part of the file is sent: cut the connection, so the download fails rather than
	// ends as if it were whole.
	c.cfg.Logger.LogAttrs(r.Context(), slog.LevelError, "console: audit download cut", slog.Int64("tenant", s.principal.ID), slog.Any("error", err))
	panic(http.ErrAbortHandler)
}

// auditFields are the fields of an entry the page shows (docs/audit.md, "What is
// recorded"); a field of another JSON type than expected reads as empty.
type auditFields map[string]json.RawMessage

func (f auditFields) str(key string) string {
	var s string
	if json.Unmarshal(f[key], &s) != nil {
		return ""
	}
	return s
}

func (f auditFields) num(key string) (int64, bool) {
	var n int64
	err := json.Unmarshal(f[key], &n)
	return n, err == nil && len(f[key]) > 0
}

// auditRowOf is the page's row of e; tokens names the tenant's tokens (askers), for an
// entry that names the asking token and no person.
func auditRowOf(e *audit.Entry, tokens map[int64]string) auditRow {
	row := auditRow{Seq: e.Seq, At: e.At, Kind: e.Kind, OpID: e.OpID, OpShort: e.OpID, Sealed: e.Hash != nil}
	if len(row.OpShort) > 8 {
		row.OpShort = row.OpShort[:8] + "…"
	}
	var f auditFields
	_ = json.Unmarshal(e.Fields, &f) // the log's fields are a JSON object; anything else shows nothing
	row.Tool, row.Ref = f.str("tool"), f.str("vendor_ref")
	if n, ok := f.num("amount"); ok {
		if cur := f.str("currency"); cur != "" {
			row.Amount = money.Format(n, cur)
		} else {
			row.Amount = strconv.FormatInt(n, 10) + " minor units"
		}
	}
	token := func() string {
		if n, ok := f.num("token"); ok {
			if name := tokens[n]; name != "" {
				return name
			}
			return fmt.Sprintf("token %d (no longer listed)", n)
		}
		return ""
	}
	switch e.Kind {
	case "call":
		row.Who = f.str("person")
		if row.Who == "" {
			row.Who = token()
		}
		row.Status = f.str("held")
		if row.Status == "" {
			row.Status = string(protocol.StatusPending)
		}
		row.Detail = f.str("key")
	case "status":
		row.Status, row.Detail = f.str("to"), f.str("error")
	case "event":
		row.What, row.Status = f.str("event"), f.str("to")
		if a := f.str("actor"); a != "" {
			row.Who = ActorName(a)
		}
		row.Detail = eventDetail(f["detail"])
	case "approval_requested":
		row.Who, row.Status, row.Detail = token(), string(protocol.StatusAwaitingApproval), f.str("why")
	case "withdrawn":
		row.Status = f.str("status")
	case "setting":
		row.What = strings.TrimSpace(f.str("table") + " " + f.str("op"))
	}
	return row
}

// eventDetail is what an event's recorded detail says to a person: the reason a person
// gave, why the op was held, or the reconciler's decision; else the detail as JSON.
func eventDetail(raw json.RawMessage) string {
	var d auditFields
	if json.Unmarshal(raw, &d) == nil {
		for _, k := range []string{"reason", "why", "decision"} {
			if s := d.str(k); s != "" {
				return s
			}
		}
	}
	return compactJSON(raw)
}
