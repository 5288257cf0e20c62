package eventpost

import "sync"

// Holder holds a fake's events configuration C and the Poster that delivers for
// it, so that a fake can turn events on, off or reconfigure them while it serves.
// The zero value posts nothing. It is safe for concurrent use.
type Holder[C any] struct {
	mu  sync.Mutex
	cfg *C
	p   *Poster
}

// Set makes cfg the configuration, its batches delivered by a new Poster as
// delivery says; nil stops posting (delivery is then ignored). Batches of the
// previous configuration still waiting are dropped.
func (h *Holder[C]) Set(cfg *C, delivery Config) {
	h.mu.Lock()
	old := h.p
	h.cfg, h.p = cfg, nil
	if cfg != nil {
		h.p = New(delivery)
	}
	h.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

// Config returns the configuration in force, nil when events are off.
func (h *Holder[C]) Config() *C {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg
}

// Post asks build for the batches about one object under the configuration in
// force and posts them (see Poster.Post). When events are off it calls nothing
// and returns false.
func (h *Holder[C]) Post(build func(cfg *C) []Batch) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cfg == nil {
		return false
	}
	h.p.Post(build(h.cfg)...)
	return true
}

// Stats returns the Poster's Stats, zeros when events are off.
func (h *Holder[C]) Stats() (pending, delivered, dropped int) {
	h.mu.Lock()
	p := h.p
	h.mu.Unlock()
	if p == nil {
		return 0, 0, 0
	}
	return p.Stats()
}
