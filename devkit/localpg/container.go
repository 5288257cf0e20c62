package localpg

import (
	"context"
	"fmt"
	"log/slog"
)

// ContainerFunc starts a Postgres container holding database and returns its URL and
// a function that removes the container. devkit/pgcontainer.Start is one; it lives
// in a package of its own so that a binary that does not want testcontainers-go (and
// the testing package it links) does not get it through localpg.
type ContainerFunc func(ctx context.Context, database string, logger *slog.Logger) (url string, stop func(context.Context) error, err error)

// errNoContainer is Start's answer when a Docker engine answers but Config.Container
// is nil. errors.Is(err, ErrNoPostgres) holds.
type errNoContainer struct{}

func (errNoContainer) Error() string {
	return "no Postgres found: a Docker engine answers, but this binary was built without the container fallback: set DATABASE_URL, install the PostgreSQL server (postgresql package), or build with -tags devcontainer (go run -tags devcontainer ./cmd/oncebox dev)"
}

func (errNoContainer) Is(target error) bool { return target == ErrNoPostgres }

func startContainer(ctx context.Context, cfg Config) (*Postgres, error) {
	url, stop, err := cfg.Container(ctx, cfg.Database, cfg.Logger)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, url, nil); err != nil {
		_ = stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("reach the container: %w", err)
	}
	return &Postgres{URL: url, Source: "testcontainers", closeFunc: stop}, nil
}
