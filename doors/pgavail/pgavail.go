// Package pgavail tells an error that says Postgres cannot be reached (down,
// restarting, refusing connections) from every other database error, so that callers
// answer "the store is unavailable, retry" instead of "internal error".
package pgavail

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err means that Postgres could not be reached or went
// away: a failed connect, a connection lost mid-statement, or a server that is
// shutting down, starting up or refusing connections (SQLSTATE classes 08 and 57P).
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08":
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03":
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case errors.As(err, &opErr), errors.As(err, &netErr):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	case pgconn.Timeout(err) && !errors.Is(err, context.Canceled):
		// A statement or connect that timed out: the server did not answer.
		return true
	}
	return false
}
