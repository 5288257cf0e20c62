package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Call is one request a client of the chaos run made to the API, as Jepsen
// records an operation: when it was invoked and when it returned (on one
// monotonic clock), the key and the payload it sent, and the answer.
type Call struct {
	// Client numbers the caller; calls of one client never overlap.
	Client int
	// Key is the idempotency key.
	Key string
	// Payload is the request body sent (tool and args).
	Payload string
	// Start and End bound the call, in nanoseconds of the run's clock.
	Start, End int64
	// Answer is what came back.
	Answer Answer
}

// Answer is the part of an API answer the model of an op judges.
type Answer struct {
	// Code is the HTTP status; 0 when no answer came back (the call's effect is
	// then unknown, as for a 5xx).
	Code int
	// OpID and Status are the op's id and status as the answer names them.
	OpID, Status string
	// Result is the op's outcome as the answer shows it (result, error and
	// vendor_ref), compared once the op is terminal.
	Result string
}

// answerOf reads an API answer of status code with body.
func answerOf(code int, body []byte) Answer {
	a := Answer{Code: code}
	if code != 200 && code != 202 {
		return a
	}
	var op struct {
		ID        string          `json:"id"`
		Status    string          `json:"status"`
		Result    json.RawMessage `json:"result"`
		Error     json.RawMessage `json:"error"`
		VendorRef string          `json:"vendor_ref"`
	}
	if json.Unmarshal(body, &op) != nil {
		a.Status = "unreadable answer: " + string(body)
		return a
	}
	a.OpID, a.Status = op.ID, op.Status
	a.Result = fmt.Sprintf("result=%s error=%s vendor_ref=%s", compact(op.Result), compact(op.Error), op.VendorRef)
	return a
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// recorder collects the calls of a run; it is safe for concurrent use.
type recorder struct {
	t0      time.Time
	mu      sync.Mutex
	calls   []Call
	clients int
}

func newRecorder() *recorder { return &recorder{t0: time.Now()} }

// client returns a fresh client number.
func (r *recorder) client() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients++
	return r.clients - 1
}

// now is the run's clock.
func (r *recorder) now() int64 { return int64(time.Since(r.t0)) }

func (r *recorder) add(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// Calls returns every call recorded so far.
func (r *recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// The op statuses, and the moves between them oncebox makes (the
// transition table of internal/opstate, drawn in docs/reliability.md): an answer may only show a status reachable from the one
// an earlier answer showed.
var transitions = map[string][]string{
	"awaiting_approval": {"pending", "rejected"},
	"pending":           {"dispatching", "unknown", "succeeded", "failed", "needs_review"},
	"dispatching":       {"succeeded", "failed", "unknown", "pending", "needs_review"},
	"unknown":           {"succeeded", "failed", "pending", "needs_review"},
	"needs_review":      {"succeeded", "failed", "pending"},
}

func terminal(status string) bool {
	return status == statusSucceeded || status == statusFailed || status == "rejected"
}

// reachable reports whether status to can follow from along the transitions.
func reachable(from, to string) bool {
	seen := map[string]bool{from: true}
	next := []string{from}
	for len(next) > 0 {
		s := next[0]
		next = next[1:]
		if s == to {
			return true
		}
		for _, t := range transitions[s] {
			if !seen[t] {
				seen[t] = true
				next = append(next, t)
			}
		}
	}
	return false
}

// opState is the sequential model's state of one key.
type opState struct {
	// Created is set once the key holds an op.
	Created bool
	// Payload is the payload the op was created with.
	Payload string
	// OpID is the op's id; empty while no answer named it (the op was created
	// by a call whose answer was lost).
	OpID string
	// Status is the last status an answer showed; empty while none did.
	Status string
	// Result is the terminal outcome an answer showed.
	Result string
}

// step is the sequential model of one op: the first accepted POST creates it
// (202); every later POST with the same payload is a replay (200) naming the
// same op, with a status reachable from the last one seen, and once terminal
// the same terminal status and result; a POST with another payload is refused
// (422) and changes nothing. A call without an answer, or answered 5xx, may or
// may not have created the op.
func step(s opState, payload string, a Answer) []opState {
	switch {
	case a.Code == 0 || a.Code >= 500:
		if !s.Created {
			return []opState{s, {Created: true, Payload: payload}}
		}
		return []opState{s}
	case a.Code == 202:
		if s.Created {
			return nil
		}
		next := opState{Created: true, Payload: payload, OpID: a.OpID, Status: a.Status}
		if terminal(a.Status) {
			next.Result = a.Result
		}
		return []opState{next}
	case a.Code == 200:
		if !s.Created || s.Payload != payload || (s.OpID != "" && s.OpID != a.OpID) {
			return nil
		}
		switch {
		case s.Status == "":
		case terminal(s.Status):
			if a.Status != s.Status || a.Result != s.Result {
				return nil
			}
		case !reachable(s.Status, a.Status):
			return nil
		}
		next := s
		next.OpID, next.Status = a.OpID, a.Status
		if terminal(a.Status) {
			next.Result = a.Result
		}
		return []opState{next}
	case a.Code == 422:
		if !s.Created || s.Payload == payload {
			return nil
		}
		return []opState{s}
	}
	// Any other refusal (400, 401, 413, 415) says nothing about the op.
	return []opState{s}
}

// opModel is step as a porcupine model.
func opModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{opState{}} },
		Step: func(state, input, output any) []any {
			next := step(state.(opState), input.(string), output.(Answer))
			out := make([]any, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		DescribeOperation: func(input, output any) string {
			return describeCall(input.(string), output.(Answer))
		},
		DescribeState: func(state any) string { return fmt.Sprintf("%+v", state.(opState)) },
	}
	return nm.ToModel()
}

func describeCall(payload string, a Answer) string {
	sum := sha256.Sum256([]byte(payload))
	s := fmt.Sprintf("POST payload#%s -> ", hex.EncodeToString(sum[:4]))
	if a.Code == 0 {
		return s + "no answer"
	}
	s += fmt.Sprintf("%d", a.Code)
	if a.OpID != "" {
		s += fmt.Sprintf(" op=%s status=%s", a.OpID, a.Status)
		if terminal(a.Status) {
			s += " " + a.Result
		}
	}
	return s
}

// perKeyTimeout bounds the search for one key's linearization; a key whose
// check runs out of time counts as unchecked, not as broken.
const perKeyTimeout = 10 * time.Second

// HistoryReport is the result of CheckHistory.
type HistoryReport struct {
	// Keys is how many keys were checked; Calls how many calls.
	Keys, Calls int
	// Illegal are the keys whose history no sequential order explains.
	Illegal []string
	// Unchecked are the keys whose check ran out of time.
	Unchecked []string
	// Smallest is the smallest history found that no sequential order
	// explains: a failing key's calls, cut down while it still fails.
	Smallest []Call
}

// OK reports whether every key's history is linearizable.
func (r HistoryReport) OK() bool { return len(r.Illegal) == 0 }

// CheckHistory checks each key's calls for linearizability against the
// sequential model of an op (step), and finds the smallest failing history.
func CheckHistory(calls []Call) HistoryReport {
	byKey := map[string][]Call{}
	for _, c := range calls {
		byKey[c.Key] = append(byKey[c.Key], c)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rep := HistoryReport{Keys: len(keys), Calls: len(calls)}
	model := opModel()
	for _, k := range keys {
		switch porcupine.CheckOperationsTimeout(model, operations(byKey[k]), perKeyTimeout) {
		case porcupine.Illegal:
			rep.Illegal = append(rep.Illegal, k)
			if small := shrink(model, byKey[k]); rep.Smallest == nil || len(small) < len(rep.Smallest) {
				rep.Smallest = small
			}
		case porcupine.Unknown:
			rep.Unchecked = append(rep.Unchecked, k)
		}
	}
	return rep
}

func operations(calls []Call) []porcupine.Operation {
	ops := make([]porcupine.Operation, len(calls))
	for i, c := range calls {
		ops[i] = porcupine.Operation{ClientId: c.Client, Input: c.Payload, Call: c.Start, Output: c.Answer, Return: c.End}
	}
	return ops
}

// shrink removes calls from an illegal history, one at a time, as long as it
// stays illegal: what is left explains the failure with nothing extra. The calls
// that may have created the op (answered 202, or not answered) stay, so that a
// replay is never shown without the op it replays.
func shrink(model porcupine.Model, calls []Call) []Call {
	cur := slices.Clone(calls)
	for i := 0; i < len(cur); {
		if code := cur[i].Answer.Code; code == 202 || code == 0 || code >= 500 {
			i++
			continue
		}
		try := slices.Delete(slices.Clone(cur), i, i+1)
		if len(try) > 0 && porcupine.CheckOperationsTimeout(model, operations(try), perKeyTimeout) == porcupine.Illegal {
			cur = try
			continue
		}
		i++
	}
	slices.SortFunc(cur, func(a, b Call) int { return int(a.Start - b.Start) })
	return cur
}

// FormatHistory prints calls one a line, in the order they started.
func FormatHistory(calls []Call) string {
	var b strings.Builder
	for _, c := range calls {
		fmt.Fprintf(&b, "  client=%d key=%s [%s .. %s] %s\n", c.Client, c.Key,
			time.Duration(c.Start).Round(time.Microsecond), time.Duration(c.End).Round(time.Microsecond),
			describeCall(c.Payload, c.Answer))
	}
	return b.String()
}
