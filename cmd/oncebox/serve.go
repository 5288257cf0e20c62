package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"time"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/server"
)

// runServe is `oncebox serve`: the API, the workers and the periodic jobs (--roles), with
// every setting of settings().
func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg, logger, err := parseServerArgs(fs, args)
	if err != nil {
		return err
	}
	stopTracing, err := setupTracing(ctx, &cfg, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	srv, err := server.New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer srv.Close()
	return srv.Run(ctx)
}

// setupTracing sets cfg.TracerProvider from the OTEL_* environment variables (off when
// they configure no exporter) and returns what flushes the spans on the way out.
func setupTracing(ctx context.Context, cfg *server.Config, logger *slog.Logger) (func(), error) {
	tp, shutdown, err := tracing.Setup(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	if tp == nil {
		return func() {}, nil
	}
	cfg.TracerProvider = tp
	logger.Info("tracing on: spans are exported as the OTEL_* environment variables say")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			logger.Warn("tracing: flushing spans failed", slog.Any("error", err))
		}
	}, nil
}
