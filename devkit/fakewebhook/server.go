package fakewebhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/oncebox/oncebox/devkit/fakefault"
)

// Config configures a Server. The zero value is ready to use.
type Config struct {
	// HonourKeys makes the server deduplicate POSTs by their Idempotency-Key
	// header, replaying the stored status and body with
	// "Idempotent-Replayed: true". Defaults to false (every POST is new).
	HonourKeys bool

	// LookupLag hides effects younger than this from GET /_lookup. Defaults
	// to 0 (everything is visible at once).
	LookupLag time.Duration

	// Now returns the current time. It stamps effects and decides what
	// /_lookup can see. Defaults to time.Now.
	Now func() time.Time

	// HangFor is how long FaultHangAfterEffect holds a request before
	// answering, unless the client goes away first or ReleaseHangs is called.
	// Defaults to 30s.
	HangFor time.Duration

	// RefusePrefix, when set, makes every POST to a path that begins with it
	// answer 422 {"error":"refused"} and perform nothing, every time, whatever
	// its key: a receiver that refuses an order for good. No fault is drawn
	// for such a POST and nothing is stored under its key. Defaults to "" (no
	// path is refused).
	RefusePrefix string
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.HangFor <= 0 {
		c.HangFor = 30 * time.Second
	}
	return c
}

// maxBody is the largest POST body the fake reads.
const maxBody = 1 << 20

// Server is a stateful fake webhook receiver. It implements http.Handler and
// is safe for concurrent use.
type Server struct {
	cfg Config

	mu       sync.Mutex
	seq      int64
	effects  []Effect
	keys     map[string]*keyEntry
	faults   fakefault.Injector[Fault, FaultKind]
	hangs    fakefault.Hangs
	requests int
	block    <-chan struct{}
	hook     func(Effect)
}

// keyEntry is what the server keeps for one Idempotency-Key.
type keyEntry struct {
	// done is false while the first request still runs; the same key then
	// answers 409.
	done     bool
	status   int
	body     []byte
	effectID string
}

// New returns a Server with no effects, no stored keys and no faults.
func New(cfg Config) *Server {
	return &Server{
		cfg:  cfg.withDefaults(),
		keys: make(map[string]*keyEntry),
	}
}

// ServeHTTP answers one request as a webhook receiver would.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost:
		s.servePost(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/_lookup":
		s.serveLookup(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/_effects":
		s.serveEffects(w)
	default:
		writeJSON(w, http.StatusNotFound, []byte(`{"error":"not_found"}`))
	}
}

// SetBlock makes every POST that performs an effect wait, after recording it,
// until ch is closed (or the client goes away) before answering. It lets a
// test stop a worker between the receiver's action and its answer. A nil ch
// clears it; requests already waiting keep waiting for their channel.
func (s *Server) SetBlock(ch <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.block = ch
}

// EffectHook sets f to be called with each effect once it is recorded, before
// the request is answered. A nil f clears it. f runs on the request's
// goroutine and must not call SetBlock or EffectHook.
func (s *Server) EffectHook(f func(Effect)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = f
}

// Requests returns how many POSTs the server received, whatever became of
// them.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *Server) servePost(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()

	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		// The client went away while sending: nothing is done.
		return
	}

	if s.cfg.RefusePrefix != "" && strings.HasPrefix(r.URL.Path, s.cfg.RefusePrefix) {
		writeJSON(w, http.StatusUnprocessableEntity, []byte(`{"error":"refused"}`))
		return
	}

	fault, faulty := s.takeFault()
	if faulty {
		switch fault.Kind {
		case FaultDropBeforeEffect:
			fakefault.DropConnection(w)
			return
		case Fault429:
			w.Header().Set("Retry-After", fakefault.RetryAfter(fault.RetryAfter))
			writeJSON(w, http.StatusTooManyRequests, []byte(`{"error":"rate_limited"}`))
			return
		case Fault409:
			writeJSON(w, http.StatusConflict, []byte(`{"error":"conflict"}`))
			return
		case FaultReject:
			status := fault.Status
			if status == 0 {
				status = http.StatusBadRequest
			}
			writeJSON(w, status, []byte(`{"error":"rejected"}`))
			return
		}
	}
	if len(body) > maxBody {
		writeJSON(w, http.StatusRequestEntityTooLarge, []byte(`{"error":"body_too_large"}`))
		return
	}
	if !json.Valid(body) {
		writeJSON(w, http.StatusBadRequest, []byte(`{"error":"invalid_json"}`))
		return
	}

	key := ""
	if s.cfg.HonourKeys {
		key = strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	}
	entry, replay, inFlight := s.claimKey(key)
	switch {
	case inFlight:
		writeJSON(w, http.StatusConflict, []byte(`{"error":"idempotency_key_in_use"}`))
		return
	case replay != nil:
		w.Header().Set("Idempotent-Replayed", "true")
		if replay.effectID != "" {
			w.Header().Set("X-Request-Id", replay.effectID)
		}
		if faulty && fault.Kind == FaultHangAfterEffect {
			s.hold(r)
		}
		if faulty && fault.Kind == FaultDropAfterEffect {
			fakefault.DropConnection(w)
			return
		}
		writeJSON(w, replay.status, replay.body)
		return
	}

	if faulty && fault.Kind == Fault500Stored {
		s.finish(key, entry, http.StatusInternalServerError, []byte(`{"error":"internal"}`), "")
		writeJSON(w, http.StatusInternalServerError, []byte(`{"error":"internal"}`))
		return
	}

	e, block, hook := s.record(r, key, body)
	if hook != nil {
		hook(e)
	}
	status, answer := http.StatusOK, []byte(okAnswer(e.ID))
	if faulty && fault.Kind == Fault500AfterEffect {
		status, answer = http.StatusInternalServerError, []byte(`{"error":"internal"}`)
	}
	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}
	if faulty && fault.Kind == FaultHangAfterEffect {
		s.hold(r)
	}
	s.finish(key, entry, status, answer, e.ID)
	if faulty && fault.Kind == FaultDropAfterEffect {
		fakefault.DropConnection(w)
		return
	}
	w.Header().Set("X-Request-Id", e.ID)
	writeJSON(w, status, answer)
}

// claimKey looks key up. It returns the stored answer to replay, or reports
// that the key is in flight, or claims the key with a new in-flight entry.
// An empty key claims nothing.
func (s *Server) claimKey(key string) (entry *keyEntry, replay *keyEntry, inFlight bool) {
	if key == "" {
		return nil, nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.keys[key]; ok {
		if !e.done {
			return nil, nil, true
		}
		stored := *e
		return nil, &stored, false
	}
	entry = &keyEntry{}
	s.keys[key] = entry
	return entry, nil, false
}

// finish stores the answer under a claimed key and marks it done.
func (s *Server) finish(key string, entry *keyEntry, status int, body []byte, effectID string) {
	if entry == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	entry.status = status
	entry.body = body
	entry.effectID = effectID
	entry.done = true
	s.keys[key] = entry
}

// record stores a new effect and returns it with the block channel and hook
// in force.
func (s *Server) record(r *http.Request, key string, body []byte) (Effect, <-chan struct{}, func(Effect)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	e := Effect{
		ID:      fmt.Sprintf("fx_%06d", s.seq),
		OpID:    r.Header.Get("Oncebox-Op"),
		Key:     r.Header.Get("Idempotency-Key"),
		Path:    r.URL.Path,
		Body:    json.RawMessage(body),
		Headers: r.Header.Clone(),
		At:      s.cfg.Now(),
	}
	s.effects = append(s.effects, e)
	return e, s.block, s.hook
}

// hold blocks a FaultHangAfterEffect request for HangFor, until the client
// goes away, or until ReleaseHangs.
func (s *Server) hold(r *http.Request) {
	s.hangs.Hold(r.Context(), s.cfg.HangFor)
}

// okAnswer is the body of a POST that made the effect id.
func okAnswer(id string) json.RawMessage { return json.RawMessage(`{"id":"` + id + `","ok":true}`) }

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ExpireIdempotencyKeys forgets every stored Idempotency-Key, as a receiver
// does once its key window has passed: a key sent again acts anew.
func (s *Server) ExpireIdempotencyKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, e := range s.keys {
		if e.done {
			delete(s.keys, key)
		}
	}
}

// SetLookupLag changes how long an effect stays hidden from GET /_lookup
// (Config.LookupLag).
func (s *Server) SetLookupLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.LookupLag = d
}
