package fakefault_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakefault"
)

type kind int

type fault struct {
	kind kind
	path string
}

func TestInjectorTakesQueuedFirstInFirstOutByMatch(t *testing.T) {
	t.Parallel()
	var in fakefault.Injector[fault, kind]
	in.Inject(fault{kind: 1, path: "/a"})
	in.Inject(fault{kind: 2, path: "/b"})
	in.Inject(fault{kind: 3, path: "/b"})

	onB := func(f fault) bool { return f.path == "/b" }
	f, ok := in.Take(onB)
	require.True(t, ok)
	require.Equal(t, kind(2), f.kind)
	f, ok = in.Take(nil)
	require.True(t, ok)
	require.Equal(t, kind(1), f.kind)
	f, ok = in.Take(nil)
	require.True(t, ok)
	require.Equal(t, kind(3), f.kind)
	_, ok = in.Take(nil)
	require.False(t, ok)
}

func TestInjectorDrawIsReproducibleAndOff(t *testing.T) {
	t.Parallel()
	draws := func(rates map[kind]float64, seed uint64) []kind {
		var in fakefault.Injector[fault, kind]
		in.SetRandom(rates, rand.New(rand.NewPCG(seed, seed)))
		var out []kind
		for range 50 {
			k, _ := in.Draw()
			out = append(out, k)
		}
		return out
	}
	rates := map[kind]float64{1: 0.3, 2: 0.3, 3: 0}
	first := draws(rates, 7)
	require.Equal(t, first, draws(rates, 7), "the same seed draws the same sequence")
	require.Contains(t, first, kind(1))
	require.Contains(t, first, kind(2))
	require.Contains(t, first, kind(0), "outside every rate nothing is drawn")
	require.NotContains(t, first, kind(3), "a zero rate is never drawn")

	for _, off := range []map[kind]float64{nil, {1: 0, 2: -1}} {
		var in fakefault.Injector[fault, kind]
		in.SetRandom(off, rand.New(rand.NewPCG(1, 1)))
		_, ok := in.Draw()
		require.False(t, ok)
	}
}

func TestHangsRelease(t *testing.T) {
	t.Parallel()
	var h fakefault.Hangs
	h.Release() // nothing held: no effect
	done := make(chan struct{})
	go func() {
		h.Hold(context.Background(), time.Minute)
		close(done)
	}()
	require.Eventually(t, func() bool {
		h.Release()
		select {
		case <-done:
			return true
		default:
			return false
		}
	}, 10*time.Second, 10*time.Millisecond)

	start := time.Now()
	h.Hold(context.Background(), 10*time.Millisecond) // a later hold is not released
	require.GreaterOrEqual(t, time.Since(start), 10*time.Millisecond)
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{0: "1", -time.Second: "1", time.Millisecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", 3 * time.Second: "3"} {
		require.Equal(t, want, fakefault.RetryAfter(d), d)
	}
}
