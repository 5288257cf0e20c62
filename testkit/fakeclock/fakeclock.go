// Package fakeclock is a settable time source for tests: a fake vendor's Config.Now,
// or an adapter's, that a test moves forward by hand.
package fakeclock

import (
	"sync"
	"time"
)

// Clock tells a time that moves only when Advance is called. It is safe for
// concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock that tells start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock's time forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
