package api

import (
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
)

const (
	// maxAuditLimit bounds GET /v1/audit's limit parameter; without one the whole
	// window streams.
	maxAuditLimit = 100_000
	// maxAuditFilter bounds the bytes of a text filter (tool, person, outcome).
	maxAuditFilter = 255
)

// auditOutcomes are the values of the outcome parameter: an op's statuses.
var auditOutcomes = []string{string(protocol.StatusAwaitingApproval), string(protocol.StatusRejected),
	string(protocol.StatusPending), string(protocol.StatusDispatching), string(protocol.StatusSucceeded),
	string(protocol.StatusFailed), string(protocol.StatusUnknown), string(protocol.StatusNeedsReview)}

// auditParameters are the query parameters GET /v1/audit reads; any other is ignored,
// as on every route.
var auditParameters = []string{"since", "until", "tool", "person", "outcome", "min_amount", "max_amount", "limit", "format"}

// exportAudit is GET /v1/audit: the token's tenant's audit log entries of a window, in
// chain order, streamed as JSON lines or CSV (docs/audit.md). The tenant is always the
// token's; no parameter names one.
func (s *Server) exportAudit(w http.ResponseWriter, r *http.Request, t *tenant.Principal) {
	p, format, prob := auditParams(r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	p.TenantID = t.ID
	h := w.Header()
	h.Set("Content-Type", audit.ContentType(format))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	if !s.cfg.AuditExports.TryAcquire() {
		w.Header().Set("Retry-After", "5")
		writeProblem(w, protocol.NewProblem(http.StatusTooManyRequests, protocol.ProblemTooManyExports, fmt.Sprintf(
			"This process already streams %d audit exports, each on a database connection the API's calls need; retry in 5 seconds, or narrow the window.",
			s.cfg.AuditExports.Cap())))
		return
	}
	defer s.cfg.AuditExports.Release()
	started, err := audit.ExportHTTP(r.Context(), w, s.cfg.AuditLog, p, format)
	if err != nil {
		s.auditFailed(w, r, t.ID, started, err)
	}
}

// auditFailed ends an export that failed. Before its first byte went out the failure
// is answered as any other (503 when the database is unavailable); after it, no problem
// document can follow the entries: the connection is cut, so that the client sees a
// truncated answer rather than a shorter export that looks whole, and the cause is logged.
func (s *Server) auditFailed(w http.ResponseWriter, r *http.Request, tenantID int64, started bool, err error) {
	if !started {
		s.internal(w, r, fmt.Errorf("audit export: %w", err))
		return
	}
	attrs := []slog.Attr{slog.Int64("tenant", tenantID), slog.Any("error", err)}
	if r.Context().Err() != nil {
		s.logger.LogAttrs(r.Context(), slog.LevelInfo, "audit export ended: the client went away", attrs...)
	} else {
		s.logger.LogAttrs(r.Context(), slog.LevelError, "audit export failed after its first byte; the stream was cut", attrs...)
	}
	panic(http.ErrAbortHandler)
}

// auditParams reads GET /v1/audit's query parameters into the export's parameters (all
// but the tenant) and its format, or returns the problem to answer.
func auditParams(r *http.Request) (audit.ExportParams, string, *protocol.Problem) {
	var p audit.ExportParams
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return p, "", invalidField("query", "The query string is malformed ("+err.Error()+"); escape its parameters as a URL query.")
	}
	for _, name := range auditParameters {
		if len(q[name]) > 1 {
			return p, "", invalidField(name, fmt.Sprintf("The parameter %s is given %d times; give it once.", name, len(q[name])))
		}
	}
	var prob *protocol.Problem
	if p.Since, prob = auditTime(q, "since"); prob != nil {
		return p, "", prob
	}
	if p.Until, prob = auditTime(q, "until"); prob != nil {
		return p, "", prob
	}
	if !p.Since.IsZero() && !p.Until.IsZero() && !p.Until.After(p.Since) {
		return p, "", invalidField("until", "The parameter until must be after since: the window holds the entries from since until until (not included).")
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"tool", &p.Tool}, {"person", &p.Person}, {"outcome", &p.Outcome}} {
		if *f.dst, prob = auditText(q, f.name); prob != nil {
			return p, "", prob
		}
	}
	if p.Outcome != "" && !slices.Contains(auditOutcomes, p.Outcome) {
		return p, "", invalidField("outcome", fmt.Sprintf("The parameter outcome %q is not an op status; use one of %s.", p.Outcome, strings.Join(auditOutcomes, ", ")))
	}
	if p.MinAmount, prob = auditAmount(q, "min_amount"); prob != nil {
		return p, "", prob
	}
	if p.MaxAmount, prob = auditAmount(q, "max_amount"); prob != nil {
		return p, "", prob
	}
	if p.MinAmount != nil && p.MaxAmount != nil && *p.MinAmount > *p.MaxAmount {
		return p, "", invalidField("max_amount", fmt.Sprintf("The parameter max_amount (%d) is less than min_amount (%d).", *p.MaxAmount, *p.MinAmount))
	}
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxAuditLimit {
			return p, "", invalidField("limit", fmt.Sprintf("The parameter limit %q is not a whole number from 1 to %d; leave it out to stream the whole window.", raw, maxAuditLimit))
		}
		p.Limit = n
	}
	format, prob := auditFormat(r, q)
	return p, format, prob
}

// auditTime reads a time parameter: RFC 3339, or a date (midnight UTC).
func auditTime(q url.Values, name string) (time.Time, *protocol.Problem) {
	raw := q.Get(name)
	if raw == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, raw); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, raw); err == nil {
		return t, nil
	}
	return time.Time{}, invalidField(name, fmt.Sprintf("The parameter %s %q is not a time; send RFC 3339 (2026-01-31T09:00:00Z) or a date (2026-01-31, midnight UTC).", name, raw))
}

// auditText reads a text filter: printable UTF-8 of at most maxAuditFilter bytes.
func auditText(q url.Values, name string) (string, *protocol.Problem) {
	raw := q.Get(name)
	if len(raw) > maxAuditFilter || !utf8.ValidString(raw) || strings.ContainsFunc(raw, unicode.IsControl) {
		return "", invalidField(name, fmt.Sprintf("The parameter %s must be printable UTF-8 of at most %d bytes.", name, maxAuditFilter))
	}
	return raw, nil
}

// auditAmount reads an amount bound: a whole number of minor units, nil when absent.
func auditAmount(q url.Values, name string) (*int64, *protocol.Problem) {
	raw := q.Get(name)
	if raw == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return nil, invalidField(name, fmt.Sprintf("The parameter %s %q is not a whole number of minor units (2500 for 25.00).", name, raw))
	}
	return &n, nil
}

// auditFormat is the format parameter (jsonl or csv); without it, the first of
// application/jsonl and text/csv the Accept header names, else jsonl.
func auditFormat(r *http.Request, q url.Values) (string, *protocol.Problem) {
	if raw := q.Get("format"); raw != "" {
		if !slices.Contains(audit.Formats, raw) {
			return "", invalidField("format", fmt.Sprintf("The parameter format %q is not one of %s.", raw, strings.Join(audit.Formats, ", ")))
		}
		return raw, nil
	}
	for _, value := range r.Header.Values("Accept") {
		for _, part := range strings.Split(value, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch mt {
			case "application/jsonl":
				return "jsonl", nil
			case "text/csv":
				return "csv", nil
			}
		}
	}
	return "jsonl", nil
}
