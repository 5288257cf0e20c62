// Command oncebox-fakes serves oncebox's stateful fake vendors (Stripe, SendGrid and a
// webhook receiver that honours Idempotency-Key) on loopback ports, so that a real
// `oncebox serve` can be pointed at them: the MCP client recipes run this way in CI
// (make mcp-clients). It prints one line per fake, "stripe http://127.0.0.1:PORT",
// then serves until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/oncebox/oncebox/vendortest/fakesendgrid"
	"github.com/oncebox/oncebox/vendortest/fakestripe"
	"github.com/oncebox/oncebox/vendortest/fakewebhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "oncebox-fakes:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fakes := []struct {
		name string
		h    http.Handler
	}{
		{"stripe", fakestripe.New(fakestripe.Config{Logger: logger, AnyAccount: true})},
		{"sendgrid", fakesendgrid.New(fakesendgrid.Config{ActivityRatePerMinute: -1, Logger: logger})},
		{"webhook", fakewebhook.New(fakewebhook.Config{HonourKeys: true})},
	}
	errs := make(chan error, len(fakes))
	var servers []*http.Server
	for _, f := range fakes {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listen for the fake %s: %w", f.name, err)
		}
		srv := &http.Server{Handler: f.h, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		go func() { errs <- srv.Serve(l) }()
		fmt.Printf("%s http://%s\n", f.name, l.Addr())
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(shutdownCtx)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
