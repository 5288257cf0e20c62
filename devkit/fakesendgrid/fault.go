package fakesendgrid

import (
	"math/rand/v2"
	"time"
)

// FaultKind names a failure the fake can inject into POST /v3/mail/send.
type FaultKind int

const (
	// FaultAcceptThenDrop stores and counts the email, then closes the
	// connection without answering: the client sees a reset or EOF although
	// the email went out.
	FaultAcceptThenDrop FaultKind = iota + 1
	// FaultHang stores and counts the email, then holds the answer for
	// Config.HangFor or until the client goes away, whichever comes first.
	FaultHang
	// Fault429 answers 429 with X-RateLimit-Reset; nothing is stored.
	Fault429
	// Fault500Stored stores and counts the email, then answers 500.
	Fault500Stored
	// Fault500NotStored answers 500 without storing anything.
	Fault500NotStored
	// FaultDropBeforeAccept closes the connection without answering; nothing
	// is stored.
	FaultDropBeforeAccept
)

// String returns the kind's Go name.
func (k FaultKind) String() string {
	switch k {
	case FaultAcceptThenDrop:
		return "FaultAcceptThenDrop"
	case FaultHang:
		return "FaultHang"
	case Fault429:
		return "Fault429"
	case Fault500Stored:
		return "Fault500Stored"
	case Fault500NotStored:
		return "Fault500NotStored"
	case FaultDropBeforeAccept:
		return "FaultDropBeforeAccept"
	default:
		return "none"
	}
}

// Fault is one failure for a future POST /v3/mail/send.
type Fault struct {
	// Kind is what goes wrong.
	Kind FaultKind
	// RateLimitReset is, for Fault429, how far past now the X-RateLimit-Reset
	// header points (unix seconds). Defaults to 0 (now).
	RateLimitReset time.Duration
}

// InjectFault queues f for the next POST /v3/mail/send that has no earlier
// queued fault (first in, first out). The POST consumes the fault even when
// its body turns out to be invalid; the faults that store an email then answer
// 400 as usual.
func (s *Server) InjectFault(f Fault) {
	s.faults.Inject(f)
}

// SetRandomFaults makes every POST /v3/mail/send with no queued fault draw one
// at random: kind k happens with probability rates[k] (the rates should sum to
// at most 1). The draws are reproducible for a given seed. A nil or empty map
// turns random faults off.
func (s *Server) SetRandomFaults(rates map[FaultKind]float64, seed int64) {
	s.faults.SetRandom(rates, rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x5e4d6a11))) //nolint:gosec // Reproducible chaos, not security.
}

// nextFault pops the queued fault, or draws a random one, or returns the zero
// Fault (no failure).
func (s *Server) nextFault() Fault {
	if f, ok := s.faults.Take(nil); ok {
		return f
	}
	kind, _ := s.faults.Draw()
	return Fault{Kind: kind}
}
