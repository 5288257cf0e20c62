// Command oncebox-fakes serves oncebox's stateful fake vendors (Stripe, SendGrid and a
// webhook receiver that honours Idempotency-Key) on loopback ports, so that a real
// `oncebox serve` can be pointed at them: the MCP client recipes run this way in CI
// (make mcp-clients). It prints one line per fake, "stripe http://127.0.0.1:PORT",
// then serves until SIGINT or SIGTERM. --stripe-delay D holds each PaymentIntent creation
// for D before answering (a slow vendor: make agent-frameworks uses it so that an MCP call's
// first answer is "not confirmed yet").
package main

import (
	"context"
	"errors"
	"flag"
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
	stripeDelay := flag.Duration("stripe-delay", 0, "hold each PaymentIntent creation this long before answering (a slow vendor)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *stripeDelay); err != nil {
		fmt.Fprintln(os.Stderr, "oncebox-fakes:", err)
		os.Exit(1)
	}
}

// slowPaymentIntents holds each POST /v1/payment_intents for d before handing it on.
func slowPaymentIntents(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents" {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

func run(ctx context.Context, stripeDelay time.Duration) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fakes := []struct {
		name string
		h    http.Handler
	}{
		{"stripe", slowPaymentIntents(fakestripe.New(fakestripe.Config{Logger: logger}), stripeDelay)},
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
