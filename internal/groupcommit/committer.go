// Package groupcommit gathers the calls that arrive together into groups, so that each
// group commits in one transaction: concurrent callers share one BEGIN, one COMMIT and one
// WAL flush. It is the enqueue's group commit (outbox.Config.GroupCommit), in a room of
// its own: it knows nothing of ops or SQL. outbox.New builds a Committer with New, handing
// it a Deps struct with the two things it runs: a group's transaction (Deps.Commit) and a
// call in a transaction of its own (Deps.Alone).
//
// Each call is answered once, by the group's transaction after its commit, or alone: when
// the group's transaction fails (Deps.Commit returns an error: it was rolled back and
// answered nothing) or panics (a bug), each call of the group that has no answer yet runs
// again alone, and a call that panics alone is answered with an error instead of ending
// the process.
package groupcommit

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// DefaultCommitters is Config.Committers' default, and outbox.GroupCommit.Committers'.
const DefaultCommitters = 4

// ServeMaxOps is the MaxOps oncebox serve uses by default (outbox.GroupCommit.MaxOps):
// a Config without MaxOps commits each call alone.
const ServeMaxOps = 32

// Config configures a Committer.
type Config struct {
	// MaxOps bounds the calls committed together. Defaults to 1.
	MaxOps int
	// Committers is how many group transactions may be open at once; the calls that
	// arrive meanwhile wait for the next group. Defaults to DefaultCommitters.
	Committers int
}

// Call is one call waiting for its group's commit.
type Call[In, Out any] struct {
	// Ctx is the caller's context; the caller may leave before its group commits.
	Ctx context.Context
	// In is what the call asks for.
	In   In
	once sync.Once
	out  Out
	err  error
	done chan struct{}
}

// Answer gives the call its answer, once, and wakes its caller. Later answers are
// dropped.
func (g *Call[In, Out]) Answer(out Out, err error) {
	g.once.Do(func() {
		g.out, g.err = out, err
		close(g.done)
	})
}

// answered reports whether the call has its answer.
func (g *Call[In, Out]) answered() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// Deps is what a Committer runs; outbox.New hands it over. Both fields are required.
type Deps[In, Out any] struct {
	// Commit runs a group's calls in one transaction, commits it, and only then answers
	// each call (Call.Answer). An error means the transaction was rolled back and no call
	// was answered: each then runs alone.
	Commit func(group []*Call[In, Out]) error
	// Alone runs one call in a transaction of its own, as without group commit.
	Alone func(ctx context.Context, in In) (Out, error)
}

// Committer gathers the calls that arrive while its groups commit. It starts a
// goroutine per open group, up to Config.Committers; each takes the waiting calls, up to
// Config.MaxOps, commits them, and ends when no call waits.
type Committer[In, Out any] struct {
	cfg  Config
	deps Deps[In, Out]
	mu   sync.Mutex
	wait []*Call[In, Out]
	open int
}

// New builds a Committer from cfg, with its defaults filled in, and deps.
func New[In, Out any](cfg Config, deps Deps[In, Out]) *Committer[In, Out] {
	if cfg.Committers < 1 {
		cfg.Committers = DefaultCommitters
	}
	if cfg.MaxOps < 1 {
		cfg.MaxOps = 1
	}
	return &Committer[In, Out]{cfg: cfg, deps: deps}
}

// Waiting is how many calls wait for a group.
func (c *Committer[In, Out]) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.wait)
}

// Enqueue records in with the next group and returns once that group committed (or
// ctx is done: the call may then still commit).
func (c *Committer[In, Out]) Enqueue(ctx context.Context, in In) (Out, error) {
	g := &Call[In, Out]{Ctx: ctx, In: in, done: make(chan struct{})}
	c.mu.Lock()
	c.wait = append(c.wait, g)
	start := c.open < c.cfg.Committers
	if start {
		c.open++
	}
	c.mu.Unlock()
	if start {
		go c.run()
	}
	select {
	case <-g.done:
		return g.out, g.err
	case <-ctx.Done():
		var zero Out
		return zero, ctx.Err()
	}
}

// run commits groups until no call waits.
func (c *Committer[In, Out]) run() {
	for {
		c.mu.Lock()
		if len(c.wait) == 0 {
			c.open--
			c.mu.Unlock()
			return
		}
		n := min(len(c.wait), c.cfg.MaxOps)
		group := slices.Clone(c.wait[:n])
		c.wait = slices.Delete(c.wait, 0, n)
		c.mu.Unlock()
		c.commitOrAnswerPanic(group)
	}
}

// commitOrAnswerPanic commits the group; a failed transaction, or a panic in one of its
// calls (a bug), rolls the group back, and each of its calls runs again in a transaction
// of its own: the call that panics fails alone, with an error, as a panic in a request's
// own transaction would, instead of ending the process, and the others commit.
func (c *Committer[In, Out]) commitOrAnswerPanic(group []*Call[In, Out]) {
	defer func() {
		if r := recover(); r != nil {
			c.runAlone(group)
		}
	}()
	if err := c.deps.Commit(group); err != nil {
		c.runAlone(group)
	}
}

// runAlone runs each call of a rolled-back group that has no answer yet in a
// transaction of its own; a call that panics is answered with an error.
func (c *Committer[In, Out]) runAlone(group []*Call[In, Out]) {
	for _, g := range group {
		if g.answered() {
			continue
		}
		if err := g.Ctx.Err(); err != nil {
			var zero Out
			g.Answer(zero, err)
			continue
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					var zero Out
					g.Answer(zero, fmt.Errorf("outbox: the enqueue panicked, and its transaction was rolled back: %v", r))
				}
			}()
			g.Answer(c.deps.Alone(context.WithoutCancel(g.Ctx), g.In))
		}()
	}
}
