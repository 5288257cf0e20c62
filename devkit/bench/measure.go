package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Load says how much work one measurement does: Ops operations in all, or as many as
// fit in Duration, whichever ends first. At least one of them must be set.
type Load struct {
	// Ops is the number of operations to run, shared by all callers. 0 means no limit.
	Ops int
	// Duration bounds the measurement. 0 means no limit.
	Duration time.Duration
}

// Measure is what one measurement did.
type Measure struct {
	// Ops is how many operations completed.
	Ops int
	// Elapsed is the wall time they took.
	Elapsed time.Duration
}

// Rate returns operations per second.
func (m Measure) Rate() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.Ops) / m.Elapsed.Seconds()
}

// drive runs op from callers goroutines until load is done and returns what completed.
// op gets the caller's number and a sequence number unique within this call. The first
// error stops every caller.
func drive(ctx context.Context, callers int, load Load, op func(ctx context.Context, caller, seq int) error) (Measure, error) {
	if callers < 1 {
		return Measure{}, fmt.Errorf("bench: callers %d: use 1 or more", callers)
	}
	if load.Ops <= 0 && load.Duration <= 0 {
		return Measure{}, errors.New("bench: Load needs Ops or Duration")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, done atomic.Int64
		wg         sync.WaitGroup
		errOnce    sync.Once
		firstErr   error
	)
	start := time.Now()
	var deadline time.Time
	if load.Duration > 0 {
		deadline = start.Add(load.Duration)
	}
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				seq := int(next.Add(1) - 1)
				if load.Ops > 0 && seq >= load.Ops {
					return
				}
				if !deadline.IsZero() && time.Now().After(deadline) {
					return
				}
				if err := op(ctx, c, seq); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	m := Measure{Ops: int(done.Load()), Elapsed: time.Since(start)}
	if firstErr != nil {
		return m, firstErr
	}
	return m, ctx.Err()
}
