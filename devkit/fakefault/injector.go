package fakefault

import (
	"math/rand/v2"
	"slices"
	"sync"
)

// Injector holds the faults a fake server injects into its requests: faults
// queued with Inject, taken first in, first out, and random kinds drawn at set
// rates. F is the fake's fault and K its kind. The zero value injects nothing.
// It is safe for concurrent use.
type Injector[F any, K ~int] struct {
	mu     sync.Mutex
	queued []F
	rates  []rate[K]
	rng    *rand.Rand
}

// rate is one kind's probability, kept sorted by kind so that a seed always
// draws the same sequence.
type rate[K ~int] struct {
	kind K
	rate float64
}

// Inject queues f behind the faults already queued.
func (in *Injector[F, K]) Inject(f F) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.queued = append(in.queued, f)
}

// SetRandom makes every Draw return kind k with probability rates[k] (the
// rates should add up to at most 1; rates at or below 0 are left out) and no
// kind otherwise, drawing from rng. A nil rng or no positive rate turns random
// faults off.
func (in *Injector[F, K]) SetRandom(rates map[K]float64, rng *rand.Rand) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rates, in.rng = nil, nil
	for kind, r := range rates {
		if r > 0 {
			in.rates = append(in.rates, rate[K]{kind: kind, rate: r})
		}
	}
	if len(in.rates) == 0 || rng == nil {
		in.rates = nil
		return
	}
	slices.SortFunc(in.rates, func(a, b rate[K]) int { return int(a.kind) - int(b.kind) })
	in.rng = rng
}

// Take removes and returns the first queued fault that match accepts; a nil
// match accepts any. It reports false when none does.
func (in *Injector[F, K]) Take(match func(F) bool) (F, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, f := range in.queued {
		if match == nil || match(f) {
			in.queued = slices.Delete(in.queued, i, i+1)
			return f, true
		}
	}
	var none F
	return none, false
}

// Draw draws a random kind at the rates of SetRandom. It reports false when
// random faults are off or the draw falls outside every rate.
func (in *Injector[F, K]) Draw() (K, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.rng == nil {
		return 0, false
	}
	u := in.rng.Float64()
	var cumulative float64
	for _, r := range in.rates {
		cumulative += r.rate
		if u < cumulative {
			return r.kind, true
		}
	}
	return 0, false
}
