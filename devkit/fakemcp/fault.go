package fakemcp

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// FaultKind names a failure SetRandomFaults can inject into a send_mail call served by
// Handler.
type FaultKind int

const (
	// FaultDropAfterActing records the mail, then closes the connection without
	// answering (as DropAfterActing).
	FaultDropAfterActing FaultKind = iota + 1
	// FaultHangAfterActing records the mail, then holds the answer (as
	// HangAfterActing): a call cancelled meanwhile gets none; otherwise the mail is
	// answered late, once the hang bound (SetHangFor) is over or Release is called.
	FaultHangAfterActing
	// FaultIsError answers isError without recording anything (as FailNext); the
	// refusal is kept (Refusals).
	FaultIsError
)

// String returns the name of the constant.
func (k FaultKind) String() string {
	switch k {
	case FaultDropAfterActing:
		return "FaultDropAfterActing"
	case FaultHangAfterActing:
		return "FaultHangAfterActing"
	case FaultIsError:
		return "FaultIsError"
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// metaFault is the _meta key under which Handler tells send_mail the fault it drew for
// the call; it is removed before the call's _meta is recorded.
const metaFault = "fakemcp/fault"

// SetRandomFaults makes every send_mail call served by Handler draw a fault: kind k with
// probability rates[k] (the rates should add up to at most 1), none otherwise, from a
// generator seeded with seed. A nil or empty map turns random faults off. A call that
// replays a native key (SetNativeKeys) is never refused with isError and never hangs:
// it answers the mail its key made, though a drop may still lose that answer.
func (s *Server) SetRandomFaults(rates map[FaultKind]float64, seed int64) {
	s.random.SetRandom(rates, rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x3c9)))
}

// SetHangFor bounds how long a hanging call holds its answer (0, the default: until it
// is cancelled or Release is called).
func (s *Server) SetHangFor(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hangFor = d
}

// drawFault draws the fault of one call; s.mu must be held.
func (s *Server) drawFault() (FaultKind, bool) {
	kind, ok := s.random.Draw()
	if ok {
		s.faults[kind]++
	}
	return kind, ok
}

// Faults counts the random faults drawn so far, by kind.
func (s *Server) Faults() map[FaultKind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[FaultKind]int, len(s.faults))
	for k, n := range s.faults {
		out[k] = n
	}
	return out
}
