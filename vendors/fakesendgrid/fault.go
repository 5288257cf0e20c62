package fakesendgrid

import (
	"maps"
	"math/rand/v2"
	"net/http"
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

// faultKinds lists every kind in a fixed order, so random draws are
// reproducible for a given seed.
var faultKinds = []FaultKind{
	FaultAcceptThenDrop, FaultHang, Fault429, Fault500Stored, Fault500NotStored, FaultDropBeforeAccept,
}

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
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// SetRandomFaults makes every POST /v3/mail/send with no queued fault draw one
// at random: kind k happens with probability rates[k] (the rates should sum to
// at most 1). The draws are reproducible for a given seed. A nil or empty map
// turns random faults off.
func (s *Server) SetRandomFaults(rates map[FaultKind]float64, seed int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(rates) == 0 {
		s.randomRates, s.rng = nil, nil
		return
	}
	s.randomRates = maps.Clone(rates)
	s.rng = rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x5e4d6a11)) //nolint:gosec // Reproducible chaos, not security.
}

// nextFault pops the queued fault, or draws a random one, or returns the zero
// Fault (no failure).
func (s *Server) nextFault() Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) > 0 {
		f := s.faults[0]
		s.faults = s.faults[1:]
		return f
	}
	if s.rng == nil {
		return Fault{}
	}
	draw, sum := s.rng.Float64(), 0.0
	for _, k := range faultKinds {
		sum += s.randomRates[k]
		if draw < sum {
			return Fault{Kind: k}
		}
	}
	return Fault{}
}

// dropConnection closes the client's connection without writing a response.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	// HTTP/2 or a wrapped writer: aborting the handler resets the stream.
	panic(http.ErrAbortHandler)
}
