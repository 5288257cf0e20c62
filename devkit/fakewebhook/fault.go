package fakewebhook

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// FaultKind names a failure the fake can inject into a POST.
type FaultKind int

const (
	// FaultDropAfterEffect performs the effect, stores its answer under the
	// key, then closes the connection without answering.
	FaultDropAfterEffect FaultKind = iota + 1
	// FaultHangAfterEffect performs the effect, then holds the request for
	// Config.HangFor (or until the client goes away or ReleaseHangs is called)
	// before answering 200. While it hangs its key is in flight: the same key
	// answers 409 when HonourKeys.
	FaultHangAfterEffect
	// Fault500Stored answers 500 without performing the effect and, when
	// HonourKeys, stores that 500 under the key, so the same key replays it.
	Fault500Stored
	// Fault500AfterEffect performs the effect, then answers 500 (stored under
	// the key when HonourKeys).
	Fault500AfterEffect
	// Fault429 answers 429 with a Retry-After header; nothing is performed or
	// stored.
	Fault429
	// Fault409 answers 409; nothing is performed or stored.
	Fault409
	// FaultDropBeforeEffect closes the connection without doing anything.
	FaultDropBeforeEffect
	// FaultReject answers Fault.Status (a 4xx) without performing anything;
	// nothing is stored.
	FaultReject
)

// String returns the name of the constant.
func (k FaultKind) String() string {
	switch k {
	case FaultDropAfterEffect:
		return "FaultDropAfterEffect"
	case FaultHangAfterEffect:
		return "FaultHangAfterEffect"
	case Fault500Stored:
		return "Fault500Stored"
	case Fault500AfterEffect:
		return "Fault500AfterEffect"
	case Fault429:
		return "Fault429"
	case Fault409:
		return "Fault409"
	case FaultDropBeforeEffect:
		return "FaultDropBeforeEffect"
	case FaultReject:
		return "FaultReject"
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is one failure to inject into a POST.
type Fault struct {
	// Kind is the failure.
	Kind FaultKind
	// RetryAfter is the Retry-After of a Fault429, rounded up to whole
	// seconds. Defaults to 1s.
	RetryAfter time.Duration
	// Status is the status a FaultReject answers. Defaults to 400.
	Status int
}

// InjectFault queues f: the next POST suffers it. Faults are taken first in,
// first out; a queued fault wins over a random one.
//
// A fault is consumed by the POST it hits whatever that POST turns out to be.
// On a replay (HonourKeys and a stored key) FaultDropAfterEffect and
// FaultHangAfterEffect still drop or delay the answer, while Fault500Stored
// and Fault500AfterEffect do nothing.
func (s *Server) InjectFault(f Fault) {
	s.faults.Inject(f)
}

// SetRandomFaults makes every POST draw a fault: kind k with probability
// rates[k] (the rates should add up to at most 1), none otherwise. The draws
// come from a generator seeded with seed. A nil or empty map turns random
// faults off.
func (s *Server) SetRandomFaults(rates map[FaultKind]float64, seed int64) {
	s.faults.SetRandom(rates, rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x5eed)))
}

// ReleaseHangs ends every request currently held by FaultHangAfterEffect; they
// answer at once. Later hangs are not affected.
func (s *Server) ReleaseHangs() {
	s.hangs.Release()
}

// takeFault removes and returns the fault for the next POST, if any.
func (s *Server) takeFault() (Fault, bool) {
	if f, ok := s.faults.Take(nil); ok {
		return f, true
	}
	kind, ok := s.faults.Draw()
	return Fault{Kind: kind}, ok
}
