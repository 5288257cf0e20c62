// Package testlog holds what tests need to read the logs of code under test.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a log sink safe for concurrent writers: give it to slog.NewJSONHandler or
// slog.NewTextHandler and read what was logged with String.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
