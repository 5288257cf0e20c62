package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/internal/fleet"
)

// The reasons of a /readyz refusal (its member reason): why this process should get no
// traffic and no rolling update should count it as up.
const (
	// ReadyStoreUnavailable: Postgres did not answer within the probe's timeout.
	ReadyStoreUnavailable = "store-unavailable"
	// ReadySchemaMismatch: the schema is behind what this binary needs (oncebox
	// migrate first), or has a contract migration this binary does not know.
	ReadySchemaMismatch = "schema-mismatch"
	// ReadyShuttingDown: SIGTERM arrived; the process finishes its work and stops.
	ReadyShuttingDown = "shutting-down"
)

// readyTimeout bounds one /readyz database check, below the chart's probe timeout.
const readyTimeout = 2 * time.Second

// health answers an orchestrator's probes: /livez (this process is not wedged: the HTTP
// server answers; it never asks Postgres or a vendor) and /readyz (this process can
// serve: Postgres answers and the schema is at or past what this binary needs).
type health struct {
	pool     *pgxpool.Pool
	logger   *slog.Logger
	stopping atomic.Bool
}

// register adds the probes to mux.
func (h *health) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /livez", h.livez)
	mux.HandleFunc("GET /readyz", h.readyz)
}

// livez answers 200 while the process can run a handler.
func (h *health) livez(w http.ResponseWriter, _ *http.Request) {
	writeHealth(w, http.StatusOK, map[string]any{"live": true})
}

// readyz answers 200 when this process can serve, else 503 with a reason and a sentence.
func (h *health) readyz(w http.ResponseWriter, r *http.Request) {
	reason, detail := h.check(r.Context())
	if reason == "" {
		writeHealth(w, http.StatusOK, map[string]any{"ready": true})
		return
	}
	h.logger.LogAttrs(r.Context(), slog.LevelWarn, "not ready", slog.String("reason", reason), slog.String("detail", detail))
	writeHealth(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": reason, "detail": detail})
}

// check returns why this process is not ready ("" when it is) and a sentence saying so.
func (h *health) check(ctx context.Context) (reason, detail string) {
	if h.stopping.Load() {
		return ReadyShuttingDown, "This process is shutting down: it finishes the dispatches it runs and takes no new work."
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	mismatch, err := fleet.CheckSchema(ctx, h.pool)
	switch {
	case mismatch != "":
		return ReadySchemaMismatch, "This process cannot run on the database's schema: " + mismatch + "."
	case err != nil:
		return ReadyStoreUnavailable, fmt.Sprintf("Postgres did not answer within %s; this process is ready again once it does.", readyTimeout)
	}
	return "", ""
}

// writeHealth writes a probe's JSON answer.
func writeHealth(w http.ResponseWriter, status int, body map[string]any) {
	b, _ := json.Marshal(body) // maps of strings and booleans always marshal
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// serveHealth serves the probes on cfg.HealthAddr, when set, until stop is called; a
// worker-only process (no API role) has probes this way.
func (s *Server) serveHealth(l net.Listener) (stop func()) {
	if l == nil {
		return func() {}
	}
	mux := http.NewServeMux()
	s.health.register(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	s.logger.Info("oncebox probes serving", slog.String("addr", l.Addr().String()))
	return func() { _ = srv.Close() }
}

// listenHealth binds cfg.HealthAddr, when set.
func (s *Server) listenHealth() error {
	if s.cfg.HealthAddr == "" || s.healthL != nil {
		return nil
	}
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", s.cfg.HealthAddr)
	if err != nil {
		return fmt.Errorf("listen on --health-addr %s: %w", s.cfg.HealthAddr, err)
	}
	s.healthL = l
	return nil
}

// HealthAddr returns the address the probes listener is bound to (nil before Run binds
// it, or without cfg.HealthAddr).
func (s *Server) HealthAddr() net.Addr {
	if s.healthL == nil {
		return nil
	}
	return s.healthL.Addr()
}
