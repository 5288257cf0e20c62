package localpg

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// containerImage matches the Postgres of docker-compose.yml.
const containerImage = "postgres:15-alpine"

func startContainer(ctx context.Context, cfg Config) (*Postgres, error) {
	cfg.Logger.InfoContext(ctx, "starting a Postgres container", slog.String("image", containerImage))
	ctr, err := tcpostgres.Run(ctx, containerImage,
		testcontainers.WithLogger(printfLogger{cfg.Logger}),
		tcpostgres.WithDatabase(cfg.Database),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		if ctr != nil {
			_ = ctr.Terminate(context.WithoutCancel(ctx))
		}
		return nil, err
	}

	url, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err == nil {
		err = waitReady(ctx, url, nil)
	}
	if err != nil {
		_ = ctr.Terminate(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("reach the container: %w", err)
	}
	return &Postgres{
		URL:    url,
		Source: "testcontainers",
		closeFunc: func(ctx context.Context) error {
			return ctr.Terminate(ctx)
		},
	}, nil
}

// printfLogger sends testcontainers' messages to slog at debug level.
type printfLogger struct {
	logger *slog.Logger
}

func (l printfLogger) Printf(format string, args ...any) {
	l.logger.Debug(fmt.Sprintf(format, args...), slog.String("component", "testcontainers"))
}
