// Package opwait wakes the HTTP API's long polls when the op they wait for settles,
// from Postgres notifications (oncebox_op_settled, sent by a trigger on oncebox_op)
// instead of each poll querying again and again.
//
// A Hub is the handler of that channel on the process's listener (internal/pglisten).
// A waiter subscribes to its op's (tenant, key) and is woken when a notification names
// it. When the listening connection is lost, every waiter is woken once it is back (it
// re-reads its op, so nothing missed meanwhile is lost) and, until then, Connected
// reports false so that waiters fall back to polling.
package opwait

import (
	"strconv"
	"strings"
	"sync"
)

// Channel is the notification channel of settled ops.
const Channel = "oncebox_op_settled"

// Hub fans settled-op notifications out to the waiters of this process.
type Hub struct {
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

// New returns a Hub; give it Channel's notifications (pglisten.Listener.Handle).
func New() *Hub {
	return &Hub{waiters: map[waitKey]map[*Waiter]struct{}{}}
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

// Listening records whether the process listens on Channel (pglisten.Handler). When it
// starts listening again, every waiter is woken: anything may have settled while
// nobody listened.
func (h *Hub) Listening(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.connected = on
	if on {
		for _, set := range h.waiters {
			for w := range set {
				w.wake()
			}
		}
	}
}

// Notified wakes the waiters of the op a notification on Channel names
// ("<tenant_id>:<idempotency_key>", pglisten.Handler); any other payload is ignored.
func (h *Hub) Notified(payload string) {
	tenant, key, ok := strings.Cut(payload, ":")
	if !ok {
		return
	}
	id, err := strconv.ParseInt(tenant, 10, 64)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.waiters[waitKey{id, key}] {
		w.wake()
	}
}
