package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/server"
)

// runServe is `oncebox serve`: the API, the workers and the periodic jobs (--roles), with
// every setting of settings(). With --tools-file, SIGHUP reloads the tool catalog.
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
	if cfg.ToolsFile != "" || cfg.TenantCatalogs != "" {
		stop := reloadOnSIGHUP(ctx, srv)
		defer stop()
	}
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

// reloadOnSIGHUP reloads srv's tool catalog on each SIGHUP (ReloadCatalog logs the
// outcome) until the returned function is called.
func reloadOnSIGHUP(ctx context.Context, srv *server.Server) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-hup:
				_ = srv.ReloadCatalog(ctx)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-finished
	}
}
