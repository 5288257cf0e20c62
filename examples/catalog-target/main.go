// Command catalog-target is a small HTTP service a tool catalog can point at: a
// helpdesk that opens tickets, written the way oncebox asks of a target.
//
//   - POST /customers/{customer_id}/tickets opens a ticket and answers 201 with it. It
//     checks the X-Api-Key header (the catalog's secret_header) against
//     HELPDESK_API_KEY, tags the ticket with the Oncebox-Op header (the op id), and
//     honours Idempotency-Key: a key seen before gets the first answer again, with
//     Idempotent-Replayed: true, and opens nothing (so the catalog may say
//     native_keys: true).
//   - GET /tickets/by-op?oncebox_op=<op id> is the catalog's lookup_path: it answers
//     {"objects":[{"id":..,"created":"<RFC 3339>","status":201,"body":<ticket>}]}, the
//     tickets tagged with that op, each with the answer its call got, so that an op
//     oncebox settles from it keeps the result a dispatch would have stored.
//
// Run it with `go run ./examples/catalog-target` (-addr, default 127.0.0.1:9090) and
// point oncebox at tools.yaml beside it. main_test.go runs it against a real oncebox.
package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9090", "address to listen on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	srv := &http.Server{Addr: *addr, Handler: NewHelpdesk(os.Getenv("HELPDESK_API_KEY")), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.WithoutCancel(ctx))
	}()
	slog.Info("catalog-target listening", slog.String("addr", *addr))
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Ticket is what the helpdesk keeps of one ticket.
type Ticket struct {
	ID         string    `json:"id"`
	CustomerID string    `json:"customer_id"`
	Subject    string    `json:"subject"`
	OpID       string    `json:"-"`
	Created    time.Time `json:"created"`
}

// answer is a stored answer to a key.
type answer struct {
	status int
	body   []byte
}

// Helpdesk is the target's HTTP handler.
type Helpdesk struct {
	apiKey string
	mu     sync.Mutex
	seq    int
	// tickets are in the order they were opened.
	tickets []Ticket
	// keys are the answers given to each Idempotency-Key.
	keys map[string]answer
}

// NewHelpdesk returns an empty helpdesk that requires apiKey in X-Api-Key ("": none).
func NewHelpdesk(apiKey string) *Helpdesk {
	return &Helpdesk{apiKey: apiKey, keys: map[string]answer{}}
}

// Tickets returns the tickets opened so far.
func (h *Helpdesk) Tickets() []Ticket {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Ticket(nil), h.tickets...)
}

// ServeHTTP implements http.Handler.
func (h *Helpdesk) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.apiKey != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Api-Key")), []byte(h.apiKey)) != 1 {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "X-Api-Key is missing or wrong"})
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /customers/{customer_id}/tickets", h.open)
	mux.HandleFunc("GET /tickets/by-op", h.byOp)
	mux.ServeHTTP(w, r)
}

func (h *Helpdesk) open(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Subject string `json:"subject"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil || in.Subject == "" {
		// A 4xx: oncebox records the op as failed and never sends it again.
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body must be JSON with a subject"})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	h.mu.Lock()
	defer h.mu.Unlock()
	if a, ok := h.keys[key]; ok && key != "" {
		w.Header().Set("Idempotent-Replayed", "true")
		writeRaw(w, a.status, a.body)
		return
	}
	h.seq++
	t := Ticket{ID: fmt.Sprintf("T-%d", h.seq), CustomerID: r.PathValue("customer_id"), Subject: in.Subject,
		OpID: r.Header.Get("Oncebox-Op"), Created: time.Now().UTC()}
	h.tickets = append(h.tickets, t)
	body, _ := json.Marshal(t)
	if key != "" {
		h.keys[key] = answer{status: http.StatusCreated, body: body}
	}
	writeRaw(w, http.StatusCreated, body)
}

// byOp lists the tickets an op opened, each with the answer its call got.
func (h *Helpdesk) byOp(w http.ResponseWriter, r *http.Request) {
	op := r.URL.Query().Get("oncebox_op")
	if op == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "oncebox_op is required"})
		return
	}
	type object struct {
		ID      string          `json:"id"`
		Created string          `json:"created"`
		Status  int             `json:"status"`
		Body    json.RawMessage `json:"body"`
	}
	h.mu.Lock()
	objects := []object{}
	for _, t := range h.tickets {
		if t.OpID == op {
			body, _ := json.Marshal(t)
			objects = append(objects, object{ID: t.ID, Created: t.Created.Format(time.RFC3339Nano), Status: http.StatusCreated, Body: body})
		}
	}
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"objects": objects})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	writeRaw(w, status, body)
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
