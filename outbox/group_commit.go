package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
)

// GroupCommit commits the enqueues that arrive together in one transaction, so that
// concurrent callers share one BEGIN, one COMMIT and one WAL flush (Config.GroupCommit).
// It applies to the enqueues in a transaction of their own (Enqueue, EnqueuePrepared:
// the HTTP and MCP doors); an EnqueueTx commits with its caller's transaction.
//
// Each enqueue of a group runs as EnqueueTx would in a caller's transaction, one after
// the other, and is answered only after the commit that holds it: an answer without an
// error is committed, and an error means nothing was committed for that call (retry it
// with its key). A refusal of one call (a key conflict, a gate's refusal) records
// nothing, so the others commit without it. Any other error ends the group's
// transaction: it is rolled back, and each of its calls runs again in a transaction of
// its own, as without group commit.
type GroupCommit struct {
	// MaxOps bounds the calls committed together. 0 or 1 turns group commit off.
	MaxOps int
	// Committers is how many group transactions may be open at once, each on a pooled
	// connection; the calls that arrive meanwhile wait for the next group. Defaults to
	// DefaultGroupCommitters when MaxOps is set.
	Committers int
}

// DefaultGroupCommitters is GroupCommit.Committers' default.
const DefaultGroupCommitters = 4

// DefaultGroupCommitOps is the MaxOps serve uses by default.
const DefaultGroupCommitOps = 32

// on reports whether group commit is on.
func (g GroupCommit) on() bool { return g.MaxOps > 1 }

// grouped is one call waiting for its group's commit.
type grouped struct {
	ctx  context.Context
	p    *Prepared
	once sync.Once
	res  *EnqueueResult
	err  error
	done chan struct{}
}

// answer gives the call its answer, once, and wakes its caller.
func (g *grouped) answer(res *EnqueueResult, err error) {
	g.once.Do(func() {
		g.res, g.err = res, err
		close(g.done)
	})
}

// committer gathers the calls that arrive while its groups commit. It starts a
// goroutine per open group, up to Committers; each takes the waiting calls, up to
// MaxOps, commits them, and ends when no call waits.
type committer struct {
	ob   *Outbox
	cfg  GroupCommit
	mu   sync.Mutex
	wait []*grouped
	open int
	// beforeCommit, in tests, runs when a group's calls are done and its COMMIT is
	// about to be sent.
	beforeCommit func()
}

func newCommitter(ob *Outbox, cfg GroupCommit) *committer {
	if cfg.Committers < 1 {
		cfg.Committers = DefaultGroupCommitters
	}
	return &committer{ob: ob, cfg: cfg}
}

// enqueue records p with the next group and returns once that group committed (or
// ctx is done: the call may then still commit).
func (c *committer) enqueue(ctx context.Context, p *Prepared) (*EnqueueResult, error) {
	g := &grouped{ctx: ctx, p: p, done: make(chan struct{})}
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
		return g.res, g.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run commits groups until no call waits.
func (c *committer) run() {
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

// commitOrAnswerPanic commits the group; a panic in one of its calls (a bug) rolls the
// group back and answers each of its calls that has no answer yet with an error, as a
// panic in a request's own transaction would, instead of ending the process.
func (c *committer) commitOrAnswerPanic(group []*grouped) {
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("outbox: an enqueue of the group panicked, and the group was rolled back: %v", r)
			for _, g := range group {
				g.answer(nil, err)
			}
		}
	}()
	c.commit(group)
}

// commit runs the group's calls in one transaction, commits it, and only then answers
// each call: an answer given before the commit could name an op that never commits.
func (c *committer) commit(group []*grouped) {
	// The same order in every group, so that two groups holding the same keys lock them
	// in the same order instead of deadlocking.
	slices.SortFunc(group, func(a, b *grouped) int {
		return cmp.Or(cmp.Compare(a.p.params.TenantID, b.p.params.TenantID), cmp.Compare(a.p.Key, b.p.Key))
	})
	tx := &lazyTx{pool: c.ob.pool}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var results []*EnqueueResult
	var errs []error
	for _, g := range group {
		if err := g.ctx.Err(); err != nil {
			// Its caller left before its turn: nothing is written for it.
			results, errs = append(results, nil), append(errs, err)
			continue
		}
		// A caller that leaves now must not abort the others' transaction.
		res, err := c.ob.enqueueTx(context.WithoutCancel(g.ctx), tx, g.p)
		if err != nil && !recordsNothing(err) {
			_ = tx.Rollback(context.Background())
			c.alone(group)
			return
		}
		results, errs = append(results, res), append(errs, err)
	}
	if c.beforeCommit != nil {
		c.beforeCommit()
	}
	if err := tx.Commit(context.Background()); err != nil {
		for i := range errs {
			if errs[i] == nil {
				// The commit's fate is unknown: the call may be retried with its key.
				results[i], errs[i] = nil, commitError(err)
			}
		}
	}
	for i, g := range group {
		g.answer(results[i], errs[i])
	}
}

// alone runs each call of a group whose transaction failed in a transaction of its own.
func (c *committer) alone(group []*grouped) {
	for _, g := range group {
		if err := g.ctx.Err(); err != nil {
			g.answer(nil, err)
			continue
		}
		g.answer(c.ob.enqueueAlone(context.WithoutCancel(g.ctx), g.p))
	}
}

// recordsNothing reports whether an enqueue's error left its transaction as it found
// it, so that the other calls of its group may still commit: a key conflict writes
// nothing, and a refusal at admission removes the op it had inserted (see admit).
func recordsNothing(err error) bool {
	var refused *admissionRefusal
	return errors.Is(err, ErrKeyConflict) || errors.As(err, &refused)
}

// admissionRefusal is the error of a call refused at admission (its objects or the
// gate) whose inserted op was removed again: its transaction holds nothing of it.
type admissionRefusal struct{ err error }

func (e *admissionRefusal) Error() string { return e.err.Error() }
func (e *admissionRefusal) Unwrap() error { return e.err }

// commitError is the error of a group's failed COMMIT.
func commitError(err error) error {
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return errors.New("outbox: the group's transaction was rolled back at commit: retry with the same key")
	}
	return errors.Join(errors.New("outbox: commit of the group: its outcome is unknown: retry with the same key"), err)
}
