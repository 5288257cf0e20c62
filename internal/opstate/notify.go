package opstate

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/oncebox/oncebox/protocol"
)

// notifySettled reports whether a change to s wakes long polls: the statuses of the
// settle trigger (migration 007).
func notifySettled(s protocol.Status) bool {
	switch s {
	case protocol.StatusSucceeded, protocol.StatusFailed, protocol.StatusRejected, protocol.StatusNeedsReview, protocol.StatusAwaitingApproval:
		return true
	}
	return false
}

// notifyTimeout bounds one batched notify.
const notifyTimeout = 5 * time.Second

// notifier sends the settle notifications of the dispatch worker's records after their
// commit, batched: whatever accumulated while one notify ran goes out in the next one,
// from one goroutine that runs while there is something to send. The notify writes
// nothing, so it takes Postgres's notification lock only for a moment, instead of
// through a commit's WAL flush as the settle trigger inside the record's transaction
// did (see migration 013).
type notifier struct {
	m       *Machine
	mu      sync.Mutex
	pending []string
	running bool
}

// add queues the notification of the op's settle and starts the sender if idle.
func (n *notifier) add(id Ident) {
	payload := strconv.FormatInt(id.TenantID, 10) + ":" + id.Key
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pending = append(n.pending, payload)
	if !n.running {
		n.running = true
		go n.run()
	}
}

func (n *notifier) run() {
	for {
		n.mu.Lock()
		batch := n.pending
		n.pending = nil
		if len(batch) == 0 {
			n.running = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		_, err := n.m.cfg.Pool.Exec(ctx, sqlNotifySettled, batch)
		cancel()
		if err != nil {
			// Waiters recheck on their own (api: every 10 s): a lost notification delays
			// an answer, it never loses one.
			n.m.cfg.Logger.Warn("long-poll notifications of settled ops not sent; waiters find out at their next recheck",
				slog.Int("ops", len(batch)), slog.Any("error", err))
		}
	}
}
