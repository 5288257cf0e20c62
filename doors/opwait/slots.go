package opwait

import (
	"context"
	"sync"
	"time"
)

// Slots caps the waits one tenant holds open at once in this process: the HTTP API's
// ?wait= requests and MCP tool calls waiting for their op count against one cap.
type Slots struct {
	max int
	mu  sync.Mutex
	n   map[int64]int
}

// NewSlots returns Slots of max waits per tenant.
func NewSlots(max int) *Slots { return &Slots{max: max, n: map[int64]int{}} }

// Max is the cap.
func (s *Slots) Max() int { return s.max }

// Take counts one more open wait of the tenant and returns the function that ends it,
// or false when the tenant already holds Max.
func (s *Slots) Take(tenantID int64) (done func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[tenantID] >= s.max {
		return nil, false
	}
	s.n[tenantID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.n[tenantID]--; s.n[tenantID] <= 0 {
				delete(s.n, tenantID)
			}
		})
	}, true
}

// Open returns how many waits are open now, over all tenants.
func (s *Slots) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.n {
		n += c
	}
	return n
}

// Until reads the tenant's op under key with read until settled says it is settled,
// d runs out, ctx is done or end is closed, and returns the last read (read once more
// after d or end). It is woken by hub's notification when the op settles (hub may be
// nil); without one, or while hub is not listening, it polls (20 ms, doubling up to
// 250 ms); while it listens, the re-read every 10 s is only a safety net.
func Until[T any](ctx context.Context, hub *Hub, end <-chan struct{}, tenantID int64, key string, d time.Duration,
	read func(context.Context) (T, error), settled func(T) bool) (T, error) {
	var wake <-chan struct{}
	if hub != nil {
		// Subscribe before the first read, so that a settle in between is not missed.
		sub := hub.Subscribe(tenantID, key)
		defer sub.Close()
		wake = sub.C
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	delay := 20 * time.Millisecond
	for {
		op, err := read(ctx)
		if err != nil || settled(op) {
			return op, err
		}
		next := delay
		if hub != nil && hub.Connected() {
			next = 10 * time.Second
		} else if delay < 250*time.Millisecond {
			delay *= 2
		}
		recheck := time.NewTimer(next)
		select {
		case <-ctx.Done():
			recheck.Stop()
			return op, nil
		case <-end:
			recheck.Stop()
			return read(ctx)
		case <-deadline.C:
			recheck.Stop()
			return read(ctx)
		case <-wake:
		case <-recheck.C:
		}
		recheck.Stop()
	}
}
