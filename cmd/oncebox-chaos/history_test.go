package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	payA = `{"tool":"webhook.post","args":{"n":1}}`
	payB = `{"tool":"webhook.post","args":{"n":2}}`
)

// call builds a call of client c on key k over [start, end].
func call(c int, start, end int64, payload string, a Answer) Call {
	return Call{Client: c, Key: "k", Payload: payload, Start: start, End: end, Answer: a}
}

func created(op, status string) Answer {
	return Answer{Code: 202, OpID: op, Status: status, Result: "r"}
}
func replay(op, status, result string) Answer {
	return Answer{Code: 200, OpID: op, Status: status, Result: result}
}

func TestHistoryLinearizable(t *testing.T) {
	t.Parallel()
	for name, h := range map[string][]Call{
		"create then replays moving forward": {
			call(0, 0, 10, payA, created("op1", "pending")),
			call(1, 20, 30, payA, replay("op1", "dispatching", "")),
			call(2, 40, 50, payA, replay("op1", "succeeded", "ok")),
			call(3, 60, 70, payA, replay("op1", "succeeded", "ok")),
		},
		"a replay that returned before the 202 but overlapped it": {
			call(0, 0, 100, payA, created("op1", "pending")),
			call(1, 10, 20, payA, replay("op1", "pending", "")),
		},
		"a lost answer created the op; later calls replay it": {
			call(0, 0, 10, payA, Answer{}),
			call(1, 20, 30, payA, replay("op1", "pending", "")),
		},
		"a 503 that did not create it": {
			call(0, 0, 10, payA, Answer{Code: 503}),
			call(1, 20, 30, payA, created("op1", "pending")),
		},
		"a conflicting payload refused": {
			call(0, 0, 10, payA, created("op1", "pending")),
			call(1, 20, 30, payB, Answer{Code: 422}),
		},
		"retry after a lost dispatch answer": {
			call(0, 0, 10, payA, created("op1", "dispatching")),
			call(1, 20, 30, payA, replay("op1", "pending", "")),
			call(1, 40, 50, payA, replay("op1", "failed", "declined")),
		},
	} {
		rep := CheckHistory(h)
		require.True(t, rep.OK(), "%s: %v\n%s", name, rep.Illegal, FormatHistory(rep.Smallest))
		require.Empty(t, rep.Unchecked, name)
	}
}

// TestHistoryIllegal feeds hand-made broken histories: each must be found, and
// the smallest history printed must be the calls that show the break.
func TestHistoryIllegal(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		calls []Call
		// smallest is how many calls the shrunk history keeps.
		smallest int
	}{
		"two 202s one after the other": {calls: []Call{
			call(0, 0, 10, payA, created("op1", "pending")),
			call(1, 15, 18, payA, replay("op1", "pending", "")),
			call(2, 20, 30, payA, created("op1", "pending")),
		}, smallest: 2},
		"two concurrent 202s": {calls: []Call{
			call(0, 0, 30, payA, created("op1", "pending")),
			call(1, 5, 25, payA, created("op2", "pending")),
		}, smallest: 2},
		"a replay naming another op": {calls: []Call{
			call(0, 0, 10, payA, created("op1", "pending")),
			call(1, 20, 30, payA, replay("op2", "pending", "")),
		}, smallest: 2},
		"a terminal state that changes": {calls: []Call{
			call(0, 0, 10, payA, created("op1", "pending")),
			call(1, 20, 30, payA, replay("op1", "succeeded", "ok")),
			call(2, 40, 50, payA, replay("op1", "failed", "declined")),
		}, smallest: 3},
		"a terminal result that changes": {calls: []Call{
			call(0, 0, 10, payA, created("op1", "succeeded")),
			call(1, 20, 30, payA, replay("op1", "succeeded", "other")),
		}, smallest: 2},
		"a status moving back from terminal": {calls: []Call{
			call(0, 0, 10, payA, created("op1", "pending")),
			call(1, 20, 30, payA, replay("op1", "succeeded", "ok")),
			call(2, 40, 50, payA, replay("op1", "dispatching", "")),
		}, smallest: 3},
		"a status moving back to awaiting approval": {calls: []Call{
			call(0, 0, 10, payA, created("op1", "pending")),
			call(1, 20, 30, payA, replay("op1", "awaiting_approval", "")),
		}, smallest: 2},
		"a conflicting payload accepted": {calls: []Call{
			call(0, 0, 10, payA, created("op1", "pending")),
			call(1, 20, 30, payB, replay("op1", "pending", "")),
		}, smallest: 2},
		"a conflicting payload created after the op": {calls: []Call{
			call(0, 0, 10, payA, created("op1", "pending")),
			call(1, 20, 30, payB, created("op1", "pending")),
		}, smallest: 2},
		"a conflict refused before anything existed": {calls: []Call{
			call(0, 0, 10, payB, Answer{Code: 422}),
			call(1, 20, 30, payA, created("op1", "pending")),
		}, smallest: 2},
		"a replay strictly before the 202": {calls: []Call{
			call(0, 0, 10, payA, replay("op1", "pending", "")),
			call(1, 20, 30, payA, created("op1", "pending")),
		}, smallest: 2},
	} {
		rep := CheckHistory(tc.calls)
		require.False(t, rep.OK(), name)
		require.Equal(t, []string{"k"}, rep.Illegal, name)
		require.Len(t, rep.Smallest, tc.smallest, "%s:\n%s", name, FormatHistory(rep.Smallest))
	}
}

// TestHistoryReportsTheSmallestKey: of two broken keys, the one with the
// shorter history is printed, and good keys are not reported.
func TestHistoryReportsTheSmallestKey(t *testing.T) {
	t.Parallel()
	var calls []Call
	for i, k := range []string{"good", "big", "small"} {
		base := int64(i * 1000)
		calls = append(calls, Call{Key: k, Payload: payA, Start: base, End: base + 10, Answer: created("op-"+k, "pending")})
	}
	for i := range 5 {
		s := int64(100 + 20*i)
		calls = append(calls, Call{Client: 1, Key: "big", Payload: payA, Start: 1000 + s, End: 1000 + s + 10, Answer: replay("op-big", "pending", "")})
	}
	calls = append(calls,
		Call{Client: 2, Key: "big", Payload: payA, Start: 1500, End: 1510, Answer: replay("op-other", "pending", "")},
		Call{Client: 3, Key: "small", Payload: payA, Start: 2100, End: 2110, Answer: created("op-small", "pending")},
	)
	rep := CheckHistory(calls)
	require.Equal(t, []string{"big", "small"}, rep.Illegal)
	require.Equal(t, 3, rep.Keys)
	require.Len(t, rep.Smallest, 2)
	require.Contains(t, FormatHistory(rep.Smallest), "key=big")
}
