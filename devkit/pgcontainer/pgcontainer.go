// Package pgcontainer starts a Postgres container through testcontainers-go, the
// last fallback of package localpg (a machine with Docker and no PostgreSQL server
// binaries). It is a package of its own because testcontainers-go links the testing
// package and testify: the test suite (testkit/dbtest) uses it always, the oncebox
// binary only when built with -tags devcontainer (see cmd/oncebox/dev_container.go),
// so that the production binary carries no test code.
package pgcontainer

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// Image matches the Postgres of docker-compose.yml.
const Image = "postgres:15-alpine"

// Start runs a Postgres container holding database and returns its URL and a function
// that removes the container. It has the signature of localpg.ContainerFunc.
func Start(ctx context.Context, database string, logger *slog.Logger) (string, func(context.Context) error, error) {
	logger.InfoContext(ctx, "starting a Postgres container", slog.String("image", Image))
	ctr, err := tcpostgres.Run(ctx, Image,
		testcontainers.WithLogger(printfLogger{logger}),
		tcpostgres.WithDatabase(database),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		if ctr != nil {
			_ = ctr.Terminate(context.WithoutCancel(ctx))
		}
		return "", nil, err
	}
	url, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = ctr.Terminate(context.WithoutCancel(ctx))
		return "", nil, fmt.Errorf("the container's connection string: %w", err)
	}
	return url, func(ctx context.Context) error { return ctr.Terminate(ctx) }, nil
}

// printfLogger sends testcontainers' messages to slog at debug level.
type printfLogger struct {
	logger *slog.Logger
}

func (l printfLogger) Printf(format string, args ...any) {
	l.logger.Debug(fmt.Sprintf(format, args...), slog.String("component", "testcontainers"))
}
