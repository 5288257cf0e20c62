// Package opwait wakes the HTTP API's long polls when the op they wait for settles,
// from Postgres notifications (LISTEN oncebox_op_settled, sent by a trigger on
// oncebox_op) instead of each poll querying again and again.
//
// One Hub holds one dedicated connection, outside any pool, that listens. A waiter
// subscribes to its op's (tenant, key) and is woken when a notification names it. When
// the listening connection is lost, every waiter is woken once it is back (it re-reads
// its op, so nothing missed meanwhile is lost) and, until then, Connected reports false
// so that waiters fall back to polling.
package opwait

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Channel is the notification channel of settled ops.
const Channel = "oncebox_op_settled"

// Hub fans settled-op notifications out to the waiters of this process.
type Hub struct {
	connConfig *pgx.ConnConfig
	logger     *slog.Logger

	mu        sync.Mutex
	waiters   map[waitKey]map[*Waiter]struct{}
	connected bool
}

type waitKey struct {
	tenant int64
	key    string
}

// Waiter is one subscription. C receives a value (without blocking the hub) when the
// op may have settled.
type Waiter struct {
	C   chan struct{}
	hub *Hub
	k   waitKey
}

// New returns a Hub that listens with its own connection made from connConfig.
func New(connConfig *pgx.ConnConfig, logger *slog.Logger) *Hub {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Hub{connConfig: connConfig, logger: logger, waiters: map[waitKey]map[*Waiter]struct{}{}}
}

// Subscribe registers a waiter for the tenant's op under key. Call Close when done.
func (h *Hub) Subscribe(tenantID int64, key string) *Waiter {
	w := &Waiter{C: make(chan struct{}, 1), hub: h, k: waitKey{tenantID, key}}
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.waiters[w.k]
	if set == nil {
		set = map[*Waiter]struct{}{}
		h.waiters[w.k] = set
	}
	set[w] = struct{}{}
	return w
}

// Close ends the subscription.
func (w *Waiter) Close() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if set := h.waiters[w.k]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(h.waiters, w.k)
		}
	}
}

// Connected reports whether the hub is listening now; when it is not, waiters must
// poll.
func (h *Hub) Connected() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.connected
}

func (w *Waiter) wake() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// Run listens until ctx is done, reconnecting after a lost connection (with a backoff
// up to 5 seconds).
func (h *Hub) Run(ctx context.Context) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := h.listen(ctx)
		h.setConnected(false)
		if ctx.Err() != nil {
			return
		}
		h.logger.Warn("long-poll notifications lost; waiters poll until they are back", slog.Any("error", err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

func (h *Hub) setConnected(v bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.connected = v
	if v {
		// Anything may have settled while nobody listened: every waiter re-reads.
		for _, set := range h.waiters {
			for w := range set {
				w.wake()
			}
		}
	}
}

func (h *Hub) listen(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, h.connConfig)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	h.setConnected(true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		tenant, key, ok := strings.Cut(n.Payload, ":")
		if !ok {
			continue
		}
		id, err := strconv.ParseInt(tenant, 10, 64)
		if err != nil {
			continue
		}
		h.mu.Lock()
		for w := range h.waiters[waitKey{id, key}] {
			w.wake()
		}
		h.mu.Unlock()
	}
}
