// Package logdedupe keeps a failure that repeats from flooding the log: while Postgres
// is down, every fetch, request and sweep fails the same way several times a second.
//
// A Handler passes the first warning or error of a kind (same level, message and
// error text) and drops the same one again for Window; the next one after that is
// passed with "repeated" set to the number dropped meanwhile. Lines below WARN pass
// untouched.
package logdedupe

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Handler is a slog.Handler that rate-limits repeated warnings and errors.
type Handler struct {
	next   slog.Handler
	window time.Duration
	state  *state
}

// state is shared by a Handler and every handler derived from it with WithAttrs or
// WithGroup.
type state struct {
	mu   sync.Mutex
	seen map[string]*entry
}

type entry struct {
	last    time.Time
	dropped int
}

// New wraps next; window is how long a repeated line is dropped (10 seconds if 0).
func New(next slog.Handler, window time.Duration) *Handler {
	if window <= 0 {
		window = 10 * time.Second
	}
	return &Handler{next: next, window: window, state: &state{seen: map[string]*entry{}}}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	key := r.Level.String() + "\x00" + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" || a.Key == "err" {
			key += "\x00" + a.Value.String()
		}
		return true
	})
	now := time.Now()
	st := h.state
	st.mu.Lock()
	e := st.seen[key]
	if e != nil && now.Sub(e.last) < h.window {
		e.dropped++
		st.mu.Unlock()
		return nil
	}
	dropped := 0
	if e == nil {
		e = &entry{}
		st.seen[key] = e
		if len(st.seen) > 10000 { // many distinct lines: forget the old ones
			for k, old := range st.seen {
				if now.Sub(old.last) >= h.window {
					delete(st.seen, k)
				}
			}
		}
	} else {
		dropped = e.dropped
	}
	e.last, e.dropped = now, 0
	st.mu.Unlock()
	if dropped > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("repeated", dropped))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), window: h.window, state: h.state}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), window: h.window, state: h.state}
}
