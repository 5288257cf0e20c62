//go:build !unix

package localpg

import (
	"context"
	"errors"
)

func startPrivate(context.Context, Config, string) (*Postgres, error) {
	return nil, errors.New("a private Postgres cluster is only supported on Unix-like systems")
}
