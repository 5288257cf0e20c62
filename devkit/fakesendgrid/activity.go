package fakesendgrid

import (
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	maxActivityLimit = 1000
	msgIDInfix       = ".filterdrecv-"
	rateWindow       = time.Minute
)

// activityRow is one entry of GET /v3/messages: one recipient of one message.
type activityRow struct {
	FromEmail     string `json:"from_email"`
	MsgID         string `json:"msg_id"`
	Subject       string `json:"subject"`
	ToEmail       string `json:"to_email"`
	Status        string `json:"status"`
	OpensCount    int    `json:"opens_count"`
	ClicksCount   int    `json:"clicks_count"`
	LastEventTime string `json:"last_event_time"`
}

// activityDetail is the body of GET /v3/messages/{msg_id}.
type activityDetail struct {
	activityRow
	TemplateID string            `json:"template_id"`
	Categories []string          `json:"categories"`
	UniqueArgs map[string]string `json:"unique_args"`
	Events     []activityEvent   `json:"events"`
}

type activityEvent struct {
	EventName string `json:"event_name"`
	Processed string `json:"processed"`
}

// activityEntry is a visible message's recipient as the query language sees it.
type activityEntry struct {
	msg   *Message
	msgID string
	to    string
}

func (e activityEntry) row() activityRow {
	return activityRow{
		FromEmail:     e.msg.From,
		MsgID:         e.msgID,
		Subject:       e.msg.Subject,
		ToEmail:       e.to,
		Status:        "delivered",
		LastEventTime: eventTime(e.msg.AcceptedAt).Format(time.RFC3339),
	}
}

// eventTime is a message's last_event_time: its acceptance, to the second in
// UTC as the activity API shows it.
func eventTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Second)
}

func (s *Server) handleActivitySearch(w http.ResponseWriter, r *http.Request) {
	if !s.admitActivity(w) {
		return
	}
	q := r.URL.Query()
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit < 1 || limit > maxActivityLimit {
		writeErrors(w, http.StatusBadRequest, *fieldError("limit", "limit is required and must be an integer from 1 to 1000"))
		return
	}
	var preds []entryPredicate
	if query := q.Get("query"); strings.TrimSpace(query) != "" {
		if preds, err = parseActivityQuery(query); err != nil {
			s.cfg.Logger.Debug("fakesendgrid: bad activity query", slog.String("query", query), slog.String("error", err.Error()))
			writeErrors(w, http.StatusBadRequest, *fieldError("query", "invalid query: "+err.Error()))
			return
		}
	}

	rows := []activityRow{}
	for _, e := range s.visibleEntries() {
		if len(rows) == limit {
			break
		}
		if !slices.ContainsFunc(preds, func(p entryPredicate) bool { return !p(e) }) {
			rows = append(rows, e.row())
		}
	}
	s.cfg.Logger.Debug("fakesendgrid: activity search", slog.Int("rows", len(rows)))
	writeJSON(w, http.StatusOK, map[string][]activityRow{"messages": rows})
}

func (s *Server) handleActivityMessage(w http.ResponseWriter, r *http.Request) {
	if !s.admitActivity(w) {
		return
	}
	msgID := r.PathValue("msg_id")
	for _, e := range s.visibleEntries() {
		if e.msgID != msgID {
			continue
		}
		processed := eventTime(e.msg.AcceptedAt).Format(time.RFC3339)
		writeJSON(w, http.StatusOK, activityDetail{
			activityRow: e.row(),
			TemplateID:  e.msg.TemplateID,
			Categories:  nonNil(e.msg.Categories),
			UniqueArgs:  nonNilMap(e.msg.CustomArgs),
			Events: []activityEvent{
				{EventName: "processed", Processed: processed},
				{EventName: "delivered", Processed: processed},
			},
		})
		return
	}
	writeErrors(w, http.StatusNotFound, apiError{Message: "Resource not found"})
}

// admitActivity applies the add-on switch and the rate limit, answering 403 or
// 429 itself and returning false when the request must stop there.
func (s *Server) admitActivity(w http.ResponseWriter) bool {
	now := s.cfg.Now()
	s.mu.Lock()
	if s.activityForbidden {
		s.mu.Unlock()
		writeErrors(w, http.StatusForbidden, apiError{Message: "access forbidden"})
		return false
	}
	limit := s.cfg.ActivityRatePerMinute
	if limit < 0 {
		s.mu.Unlock()
		return true
	}
	s.activityCalls = slices.DeleteFunc(s.activityCalls, func(t time.Time) bool { return !now.Before(t.Add(rateWindow)) })
	if len(s.activityCalls) >= limit {
		reset := s.activityCalls[0].Add(rateWindow)
		s.mu.Unlock()
		writeRateLimited(w, reset, limit)
		return false
	}
	s.activityCalls = append(s.activityCalls, now)
	remaining := limit - len(s.activityCalls)
	s.mu.Unlock()
	w.Header().Set("X-RateLimit-Limit", strconv.Itoa(limit))
	w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	return true
}

// visibleEntries returns one entry per recipient of every message older than
// the activity lag, newest message first, recipients in order.
func (s *Server) visibleEntries() []activityEntry {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []activityEntry
	for i := len(s.messages) - 1; i >= 0; i-- {
		m := s.messages[i].clone()
		if now.Sub(m.AcceptedAt) < s.activityLag {
			continue
		}
		for n, to := range m.To {
			out = append(out, activityEntry{msg: &m, msgID: m.XMessageID + msgIDInfix + strconv.Itoa(n), to: to})
		}
	}
	return out
}

// writeRateLimited answers 429 with SendGrid's rate-limit headers; limit 0
// leaves X-RateLimit-Limit out.
func writeRateLimited(w http.ResponseWriter, reset time.Time, limit int) {
	if limit > 0 {
		w.Header().Set("X-RateLimit-Limit", strconv.Itoa(limit))
	}
	w.Header().Set("X-RateLimit-Remaining", "0")
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	writeErrors(w, http.StatusTooManyRequests, apiError{Message: "too many requests"})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
