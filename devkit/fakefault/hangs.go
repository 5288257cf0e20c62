package fakefault

import (
	"context"
	"sync"
	"time"
)

// Hangs holds requests that a fault keeps from answering, until a time runs
// out, the client goes away or Release is called. The zero value is ready to
// use. It is safe for concurrent use.
type Hangs struct {
	mu      sync.Mutex
	release chan struct{}
}

// Hold blocks for d, until ctx is done, or until Release.
func (h *Hangs) Hold(ctx context.Context, d time.Duration) {
	h.mu.Lock()
	if h.release == nil {
		h.release = make(chan struct{})
	}
	release := h.release
	h.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	case <-release:
	}
}

// Release ends every Hold currently blocked; they return at once. Later calls
// to Hold are not affected.
func (h *Hangs) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.release != nil {
		close(h.release)
		h.release = nil
	}
}
