package fakesendgrid

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/oncebox/oncebox/devkit/eventpost"
	"github.com/oncebox/oncebox/devkit/fakefault"
)

const (
	defaultActivityRatePerMinute = 6
	defaultHangFor               = 30 * time.Second
)

// Config configures a Server. The zero value is usable.
type Config struct {
	// ActivityLag is how old a message must be before GET /v3/messages and
	// GET /v3/messages/{msg_id} can see it, like the real Email Activity
	// pipeline's delay. It can be changed later with SetActivityLag.
	// Defaults to 0 (visible at once).
	ActivityLag time.Duration

	// ActivityRatePerMinute is how many Email Activity requests are allowed in
	// any rolling minute; past it they answer 429 with X-RateLimit-Reset. A
	// negative value means unlimited. Defaults to 6, the real service's limit.
	ActivityRatePerMinute int

	// HangFor is how long FaultHang holds a send before answering 202, unless
	// the client goes away first. Defaults to 30s.
	HangFor time.Duration

	// Now tells the time for AcceptedAt, the activity lag and the rate limit.
	// Tests pass a controllable clock. Defaults to time.Now.
	Now func() time.Time

	// Logger receives one debug record per request handled. Defaults to a
	// logger that discards everything.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.ActivityRatePerMinute == 0 {
		c.ActivityRatePerMinute = defaultActivityRatePerMinute
	}
	if c.HangFor == 0 {
		c.HangFor = defaultHangFor
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Server is a stateful fake SendGrid API. It implements http.Handler and is
// safe for concurrent use; its lock is never held while a request hangs.
type Server struct {
	cfg Config
	mux *http.ServeMux

	mu                sync.Mutex
	messages          []Message
	sendCount         int
	faults            fakefault.Injector[Fault, FaultKind]
	activityForbidden bool
	activityLag       time.Duration
	activityCalls     []time.Time // times of allowed activity requests within the last minute
	events            eventpost.Holder[EventsConfig]
	// subuser is the name of a subuser ("" for the parent); subusers and subuserKeys
	// are the parent's subusers and their own keys (subuser.go).
	subuser     string
	subusers    map[string]*Server
	subuserKeys map[string]string
}

// New returns a Server with no messages, no faults and the activity add-on
// enabled.
func New(cfg Config) *Server {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, activityLag: cfg.ActivityLag}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v3/mail/send", s.handleMailSend)
	s.mux.HandleFunc("GET /v3/messages", s.handleActivitySearch)
	s.mux.HandleFunc("GET /v3/messages/{msg_id}", s.handleActivityMessage)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErrors(w, http.StatusNotFound, apiError{Message: "resource not found"})
	})
	return s
}

// ServeHTTP checks the bearer key, then routes the request to the endpoint it
// names.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(key) == "" {
		s.cfg.Logger.Debug("fakesendgrid: unauthorized", slog.String("path", r.URL.Path))
		writeErrors(w, http.StatusUnauthorized, apiError{Message: "authorization required"})
		return
	}
	target, ok := s.route(w, r, strings.TrimSpace(key))
	if !ok {
		return
	}
	target.mux.ServeHTTP(w, r)
}

// Messages returns a copy of every stored message in the order stored: one per
// accepted POST /v3/mail/send (faults that store included) plus those seeded
// with AddMessage.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.messages))
	for i, m := range s.messages {
		out[i] = m.clone()
	}
	return out
}

// SendCount returns how many POST /v3/mail/send calls stored an email, which is
// how many emails were sent: every accepted call counts, duplicates included.
// Messages seeded with AddMessage do not count.
func (s *Server) SendCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sendCount
}

// ByCustomArg returns copies of the stored messages whose merged custom args
// map key to value, in the order stored.
func (s *Server) ByCustomArg(key, value string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages {
		if v, ok := m.CustomArgs[key]; ok && v == value {
			out = append(out, m.clone())
		}
	}
	return out
}

// AddMessage stores m as if it had been sent earlier, for example a duplicate
// that a reconciler must find. An empty XMessageID gets a new one and a zero
// AcceptedAt gets the current time. It shows in Messages and the activity API
// but not in SendCount.
func (s *Server) AddMessage(m Message) {
	m = m.clone()
	if m.XMessageID == "" {
		m.XMessageID = newMessageID()
	}
	if m.AcceptedAt.IsZero() {
		m.AcceptedAt = s.cfg.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = append(s.messages, m)
}

// SetActivityForbidden makes the activity endpoints answer 403, as if the
// account lacked the Email Activity add-on, until it is turned off again.
func (s *Server) SetActivityForbidden(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.activityForbidden = on
}

// SetActivityLag changes how old a message must be before the activity
// endpoints see it.
func (s *Server) SetActivityLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.activityLag = d
}

// storeSent records a message accepted by POST /v3/mail/send.
func (s *Server) storeSent(m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = append(s.messages, m)
	s.sendCount++
	s.postEventsLocked(m)
}

// apiError is one entry of SendGrid's {"errors":[...]} body.
type apiError struct {
	Message string  `json:"message"`
	Field   *string `json:"field"`
	Help    any     `json:"help"`
}

func fieldError(field, message string) *apiError {
	return &apiError{Message: message, Field: &field}
}

func writeErrors(w http.ResponseWriter, status int, errs ...apiError) {
	writeJSON(w, status, map[string][]apiError{"errors": errs})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // The client going away is not the fake's problem.
}
