package localpg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// readyTimeout bounds how long Start waits for a server to accept connections.
const readyTimeout = 30 * time.Second

// waitReady polls url until a connection answers SELECT 1. It gives up after
// readyTimeout, when ctx ends, or as soon as exited is closed (the server
// died); exited may be nil.
func waitReady(ctx context.Context, url string, exited <-chan struct{}) error {
	deadline, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()

	var lastErr error
	for {
		lastErr = ping(deadline, url)
		if lastErr == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the server exited before accepting connections: %w", lastErr)
		case <-deadline.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("wait for the server: %w", ctx.Err())
			}
			return fmt.Errorf("the server did not accept connections within %s: %w", readyTimeout, lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

// ensureDatabase creates the database name through adminURL unless it exists.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to create database %q: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look for database %q: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.DuplicateDatabase {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	return nil
}

// tailBuffer keeps the last limit bytes written to it; it is safe for
// concurrent use, since exec copies a child's output from its own goroutine.
type tailBuffer struct {
	mu    sync.Mutex
	buf   []byte
	limit int
}

func newTailBuffer(limit int) *tailBuffer {
	return &tailBuffer{limit: limit}
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// Tail returns at most the last n lines written, trimmed.
func (b *tailBuffer) Tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return lastLines(string(b.buf), n)
}

// Contains reports whether the retained output contains s.
func (b *tailBuffer) Contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Contains(string(b.buf), s)
}

// lastLines returns at most the last n lines of s, trimmed.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
