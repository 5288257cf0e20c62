// Package fakesms is a stateful fake SMS vendor for the custom vendor example: it
// records every message it sends, deduplicates by Idempotency-Key, lists messages by
// the op they are tagged with, and injects faults.
//
//	POST /messages {"to": "+15550100", "body": "..."}   Idempotency-Key, Oncebox-Op
//	  -> 201 {"id": "sms_1", "to": ..., "created": "<RFC 3339>"}
//	GET /messages?oncebox_op=<op id>
//	  -> 200 {"messages": [{"id": ..., "created": ...}]}
package fakesms

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Fault is what the next POST answers instead of sending normally.
type Fault int

// The faults.
const (
	// Fault429 answers 429 with Retry-After and sends nothing.
	Fault429 Fault = iota + 1
	// FaultReject answers 400 and sends nothing.
	FaultReject
	// FaultDropAfterSend sends the message, then drops the connection unanswered.
	FaultDropAfterSend
)

// Message is one sent SMS: the side effect.
type Message struct {
	ID      string    `json:"id"`
	OpID    string    `json:"-"`
	To      string    `json:"to"`
	Body    string    `json:"body"`
	Created time.Time `json:"created"`
}

// Server is the fake. It is an http.Handler, safe for concurrent use.
type Server struct {
	mu       sync.Mutex
	messages []Message
	keys     map[string][]byte
	faults   []Fault
}

// New returns an empty fake.
func New() *Server { return &Server{keys: map[string][]byte{}} }

// Inject queues a fault for the next POST.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// ForgetKeys makes the fake forget its idempotency keys (its window has passed).
func (s *Server) ForgetKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = map[string][]byte{}
}

// SentFor counts the messages tagged with an op id.
func (s *Server) SentFor(opID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.messages {
		if m.OpID == opID {
			n++
		}
	}
	return n
}

// Sent counts every message.
func (s *Server) Sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.messages)
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/messages":
		s.send(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/messages":
		s.list(w, r)
	default:
		http.Error(w, `{"error":"not_found"}`, http.StatusNotFound)
	}
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	var in struct {
		To   string `json:"to"`
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.To == "" {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	var fault Fault
	if len(s.faults) > 0 {
		fault, s.faults = s.faults[0], s.faults[1:]
	}
	switch fault {
	case Fault429:
		s.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":"rate_limited"}`, http.StatusTooManyRequests)
		return
	case FaultReject:
		s.mu.Unlock()
		http.Error(w, `{"error":"invalid_number"}`, http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if stored, ok := s.keys[key]; ok && key != "" {
		s.mu.Unlock()
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(stored)
		return
	}
	m := Message{ID: fmt.Sprintf("sms_%d", len(s.messages)+1), OpID: r.Header.Get("Oncebox-Op"), To: in.To, Body: in.Body,
		Created: time.Now().UTC().Truncate(time.Second)}
	s.messages = append(s.messages, m)
	body, _ := json.Marshal(m)
	if key != "" {
		s.keys[key] = body
	}
	s.mu.Unlock()
	if fault == FaultDropAfterSend {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	op := r.URL.Query().Get("oncebox_op")
	s.mu.Lock()
	out := []Message{}
	for _, m := range s.messages {
		if m.OpID == op {
			out = append(out, m)
		}
	}
	s.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{"messages": out})
}
