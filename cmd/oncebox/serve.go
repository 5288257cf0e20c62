package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	if cfg.Cells != "" {
		cs, err := server.NewCells(ctx, cfg, logger)
		if err != nil {
			return err
		}
		defer cs.Close()
		if cfg.ToolsFile != "" || cfg.TenantCatalogs != "" {
			stop := reloadOnSIGHUP(ctx, cs)
			defer stop()
		}
		return cs.Run(ctx)
	}
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
// they configure no exporter), and the audit log's exporter (setupAuditLogs); it returns
// what flushes the spans on the way out.
func setupTracing(ctx context.Context, cfg *server.Config, logger *slog.Logger) (func(), error) {
	if err := setupAuditLogs(ctx, cfg, logger, os.Getenv); err != nil {
		return nil, err
	}
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

// setupAuditLogs sets cfg.AuditLogExporter from the OTEL_* environment variables when
// --audit-otel-logs is on and this process has the periodic role (the one that streams).
// On, with no log exporter configured, is an error that says what to set; on, with
// OpenTelemetry logs turned off on purpose (OTEL_SDK_DISABLED, OTEL_LOGS_EXPORTER=none),
// a warning.
func setupAuditLogs(ctx context.Context, cfg *server.Config, logger *slog.Logger, getenv func(string) string) error {
	if !cfg.AuditOTelLogs || !cfg.Roles.Periodic {
		return nil
	}
	if tracing.LogsOff(getenv) {
		logger.Warn("--audit-otel-logs is on but OTEL_SDK_DISABLED=true or OTEL_LOGS_EXPORTER=none turns OpenTelemetry logs off: the audit log is not streamed")
		return nil
	}
	if !tracing.LogsEnabled(getenv) {
		return errors.New("--audit-otel-logs needs a log exporter: set OTEL_EXPORTER_OTLP_LOGS_ENDPOINT (or OTEL_EXPORTER_OTLP_ENDPOINT) to your collector, or OTEL_LOGS_EXPORTER=console")
	}
	exp, res, err := tracing.LogExporter(ctx)
	if err != nil {
		return fmt.Errorf("--audit-otel-logs: %w", err)
	}
	cfg.AuditLogExporter, cfg.AuditLogResource = exp, res
	return nil
}

// reloadOnSIGHUP reloads srv's tool catalog on each SIGHUP (ReloadCatalog logs the
// outcome) until the returned function is called; srv is a Server, or a Cells, which
// reloads every cell it runs.
func reloadOnSIGHUP(ctx context.Context, srv interface {
	ReloadCatalog(context.Context) error
}) func() {
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
