package fakestripe

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/oncebox/oncebox/devkit/fakefault"
)

// FaultKind names a failure the fake can inject into a POST.
type FaultKind int

const (
	// FaultStored500 answers 500 api_error without creating anything and
	// stores that answer under the idempotency key, so the same key replays
	// the 500 until the key expires.
	FaultStored500 FaultKind = iota + 1
	// Fault429 answers 429 rate_limit with a Retry-After header; nothing is
	// stored.
	Fault429
	// Fault409 answers 409 idempotency_key_in_use; nothing is stored.
	Fault409
	// FaultDropAfterCreate creates the object and stores the answer under the
	// idempotency key, then closes the connection without answering.
	FaultDropAfterCreate
	// FaultHang creates the object and stores the answer, then holds the
	// request for Config.HangFor (or until the client goes away or
	// ReleaseHangs is called) before answering. While it hangs its key is in
	// use: the same key answers 409.
	FaultHang
	// FaultDropBeforeCreate closes the connection without doing anything.
	FaultDropBeforeCreate
)

// String returns the name of the constant.
func (k FaultKind) String() string {
	switch k {
	case FaultStored500:
		return "FaultStored500"
	case Fault429:
		return "Fault429"
	case Fault409:
		return "Fault409"
	case FaultDropAfterCreate:
		return "FaultDropAfterCreate"
	case FaultHang:
		return "FaultHang"
	case FaultDropBeforeCreate:
		return "FaultDropBeforeCreate"
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is one failure to inject into a POST.
type Fault struct {
	// Kind is the failure.
	Kind FaultKind
	// Path limits the fault to POSTs on this path, such as
	// "/v1/payment_intents". Empty matches any POST.
	Path string
	// RetryAfter is the Retry-After of a Fault429, rounded up to whole
	// seconds. Defaults to 1s.
	RetryAfter time.Duration
}

// InjectFault queues f: the next POST that matches f.Path suffers it. Faults
// are taken first in, first out; a queued fault wins over a random one.
//
// A fault is consumed by the POST it matches whatever that POST turns out to
// be: FaultStored500 does not override a replay or a validation error, while
// FaultHang and FaultDropAfterCreate also delay or drop a replay.
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

// ReleaseHangs ends every request currently held by FaultHang; they answer at
// once. Later hangs are not affected. Call it before closing an
// httptest.Server whose clients have no timeout.
func (s *Server) ReleaseHangs() {
	s.hangs.Release()
}

// takeFault removes and returns the fault for a POST on path, if any.
func (s *Server) takeFault(path string) (Fault, bool) {
	if f, ok := s.faults.Take(func(f Fault) bool { return f.Path == "" || f.Path == path }); ok {
		return f, true
	}
	kind, ok := s.faults.Draw()
	return Fault{Kind: kind}, ok
}

// rateLimited returns the answer of a Fault429.
func rateLimited(retryAfter time.Duration) (result, string) {
	return (&apiError{
		status:  http.StatusTooManyRequests,
		Type:    typeInvalidRequest,
		Code:    "rate_limit",
		Message: "Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.",
	}).result(), fakefault.RetryAfter(retryAfter)
}

// keyInUse returns the 409 for a key whose first request still runs.
func keyInUse() result {
	return (&apiError{
		status:  http.StatusConflict,
		Type:    typeInvalidRequest,
		Code:    "idempotency_key_in_use",
		Message: "There is currently another in-progress request using this Stripe token (probably the same idempotency key). Please try again later.",
	}).result()
}

// stored500 returns the 500 a FaultStored500 stores instead of running.
func stored500() result {
	res := (&apiError{
		status:  http.StatusInternalServerError,
		Type:    typeAPI,
		Message: "An unknown error occurred.",
	}).result()
	// Stripe says so on 500s its idempotency layer would replay anyway.
	res.shouldRetry = "false"
	return res
}
