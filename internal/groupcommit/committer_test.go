package groupcommit_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/groupcommit"
)

// recorder commits groups of ints by doubling them, and records what ran how.
type recorder struct {
	mu      sync.Mutex
	groups  [][]int
	alone   []int
	failAll bool
	panicOn int
}

func (r *recorder) commit(group []*groupcommit.Call[int, int]) error {
	ins := make([]int, 0, len(group))
	for _, g := range group {
		ins = append(ins, g.In)
		if g.In == r.panicOn {
			panic("a bug")
		}
	}
	r.mu.Lock()
	r.groups = append(r.groups, ins)
	r.mu.Unlock()
	if r.failAll {
		return errors.New("rolled back")
	}
	for _, g := range group {
		g.Answer(2*g.In, nil)
	}
	return nil
}

func (r *recorder) aloneRun(_ context.Context, in int) (int, error) {
	if in == r.panicOn {
		panic("a bug")
	}
	r.mu.Lock()
	r.alone = append(r.alone, in)
	r.mu.Unlock()
	return 2 * in, nil
}

func run(t *testing.T, r *recorder, cfg groupcommit.Config, ins []int) ([]int, []error) {
	t.Helper()
	c := groupcommit.New(cfg, groupcommit.Deps[int, int]{Commit: r.commit, Alone: r.aloneRun})
	outs, errs := make([]int, len(ins)), make([]error, len(ins))
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Go(func() { outs[i], errs[i] = c.Enqueue(context.Background(), in) })
	}
	wg.Wait()
	require.Zero(t, c.Waiting())
	return outs, errs
}

func TestEveryCallIsAnsweredByItsGroup(t *testing.T) {
	t.Parallel()
	r := &recorder{panicOn: -1}
	ins := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	outs, errs := run(t, r, groupcommit.Config{MaxOps: 3, Committers: 2}, ins)
	for i, in := range ins {
		require.NoError(t, errs[i])
		require.Equal(t, 2*in, outs[i])
	}
	n := 0
	for _, g := range r.groups {
		require.LessOrEqual(t, len(g), 3, "a group holds at most MaxOps calls")
		n += len(g)
	}
	require.Equal(t, len(ins), n)
	require.Empty(t, r.alone)
}

func TestAFailedGroupRunsEachCallAlone(t *testing.T) {
	t.Parallel()
	r := &recorder{panicOn: -1, failAll: true}
	outs, errs := run(t, r, groupcommit.Config{MaxOps: 4}, []int{1, 2, 3})
	require.Equal(t, []int{2, 4, 6}, outs)
	require.Equal(t, []error{nil, nil, nil}, errs)
	require.ElementsMatch(t, []int{1, 2, 3}, r.alone)
}

func TestAPanicFailsOnlyItsCall(t *testing.T) {
	t.Parallel()
	r := &recorder{panicOn: 2}
	outs, errs := run(t, r, groupcommit.Config{MaxOps: 4, Committers: 1}, []int{1, 2, 3})
	require.ErrorContains(t, errs[1], "the enqueue panicked, and its transaction was rolled back: a bug")
	require.Zero(t, outs[1])
	require.NoError(t, errs[0])
	require.NoError(t, errs[2])
	require.Equal(t, 2, outs[0])
	require.Equal(t, 6, outs[2])
}
