// Command custom-vendor is a binary of your own that reuses oncebox's server with a
// vendor oncebox does not ship: an SMS API (package sms, with a fake in package
// fakesms). It serves the HTTP API and MCP like `oncebox serve`, with the tool
// sms.send besides any built-in tool configured.
//
//	DATABASE_URL=postgres://... go run ./examples/custom-vendor
//
// It migrates the database, starts the fake SMS API on a loopback port, and listens on
// ONCEBOX_ADDR (127.0.0.1:8080 by default). Create a tenant with `oncebox tenant create
// demo` (it prints the agent token), then record an SMS under an idempotency key of your
// own; POST /v1/ops requires the Idempotency-Key header (400 without it), and the same
// key sent again is the same op:
//
//	curl -sS http://127.0.0.1:8080/v1/ops \
//	  -H "Authorization: Bearer $ONCEBOX_TOKEN" \
//	  -H "Idempotency-Key: welcome-sms-42" \
//	  -H "Content-Type: application/json" \
//	  -d '{"tool":"sms.send","args":{"to":"+15550100","body":"hi"}}'
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/examples/custom-vendor/fakesms"
	"github.com/oncebox/oncebox/examples/custom-vendor/sms"
	"github.com/oncebox/oncebox/migrations"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/vendorapi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, os.Getenv("DATABASE_URL"), os.Getenv("ONCEBOX_ADDR"), logger); err != nil {
		fmt.Fprintln(os.Stderr, "custom-vendor:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done.
func run(ctx context.Context, databaseURL, addr string, logger *slog.Logger) error {
	smsURL, stopSMS, err := serveFakeSMS()
	if err != nil {
		return err
	}
	defer stopSMS()
	srv, err := newServer(ctx, databaseURL, addr, smsURL, logger)
	if err != nil {
		return err
	}
	defer srv.Close()
	at, err := srv.Listen()
	if err != nil {
		return err
	}
	logger.Info("custom-vendor listening", slog.String("addr", at.String()), slog.String("sms_api", smsURL))
	return srv.Run(ctx)
}

// newServer migrates the database and builds oncebox's server with the SMS vendor
// and its tool registered.
func newServer(ctx context.Context, databaseURL, addr, smsURL string, logger *slog.Logger) (*server.Server, error) {
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	_, err = migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Logger: logger})
	pool.Close()
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	cfg := server.Defaults()
	cfg.DatabaseURL = databaseURL
	if addr != "" {
		cfg.Addr = addr
	}
	v := sms.New(smsURL, 5*time.Second)
	cfg.Vendors = []vendorapi.Vendor{v}
	cfg.Tools = []server.CustomTool{{
		Tool:        v.Tool(),
		Description: "Send one SMS. oncebox makes sure it is sent at most once.",
		InputSchema: json.RawMessage(sms.InputSchema),
	}}
	return server.New(ctx, cfg, logger)
}

// serveFakeSMS serves the fake SMS API on a loopback port.
func serveFakeSMS() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: fakesms.New(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = hs.Close() }, nil
}
