package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDiffFork: what the old primary had and the standby at the fork did not is
// counted by kind, and names the ops (and keys) it touched.
func TestDiffFork(t *testing.T) {
	t.Parallel()
	fork := &dbState{
		ops:      map[string]string{"a": "ka", "b": "kb", "d": "kd"},
		events:   map[string]int{"a": 2, "b": 1, "d": 1},
		attempts: map[string]int{"a": 1, "d": 1},
		jobs: map[int64]jobState{1: {opID: "a", attempt: 1, state: "running"}, 2: {opID: "b", attempt: 1, state: "running"},
			4: {opID: "d", attempt: 1, state: "running"}},
	}
	old := &dbState{
		ops:      map[string]string{"a": "ka", "b": "kb", "c": "kc", "d": "kd"},
		events:   map[string]int{"a": 3, "b": 1, "c": 1, "d": 1},
		attempts: map[string]int{"a": 1, "c": 1, "d": 1},
		jobs: map[int64]jobState{1: {opID: "a", attempt: 1, state: "completed"}, 2: {opID: "b", attempt: 2, state: "running"},
			3: {opID: "c", attempt: 1, state: "running"}},
	}
	l := diffFork(old, fork)
	require.Equal(t, 1, l.ops, "c's row")
	require.Equal(t, 2, l.events, "a's third event and c's first")
	require.Equal(t, 1, l.attempts, "c's attempt")
	require.Equal(t, 1, l.fetches, "b's second fetch")
	require.Equal(t, 2, l.completions, "a's completion, and d's job deleted by the record that settled d")
	require.Equal(t, map[string]bool{"a": true, "b": true, "c": true, "d": true}, l.touched)
	require.Equal(t, map[string]bool{"ka": true, "kb": true, "kc": true, "kd": true}, l.touchedKeys)
	require.Zero(t, diffFork(fork, fork).total(), "a fork that kept everything lost nothing")
}
