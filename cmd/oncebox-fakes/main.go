// Command oncebox-fakes serves oncebox's stateful fake vendors (Stripe, SendGrid and a
// webhook receiver that honours Idempotency-Key) on loopback ports, so that a real
// `oncebox serve` can be pointed at them: the MCP client recipes run this way in CI
// (make mcp-clients). It prints one line per fake, "stripe http://127.0.0.1:PORT",
// then serves until SIGINT or SIGTERM. --stripe-delay D holds each PaymentIntent creation
// for D before answering (a slow vendor: make agent-frameworks uses it so that an MCP call's
// first answer is "not confirmed yet").
// With --checkout it also serves the three services
// examples/checkout/tools.yaml names (pay, mail and shop, webhook receivers that answer
// its lookup path) on 127.0.0.1:9091, 9092 and 9093.
package main

import (
	"cmp"
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

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
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

// checkoutAddrs are the services of examples/checkout/tools.yaml, by target.
var checkoutAddrs = []struct{ name, addr string }{{"pay", "127.0.0.1:9091"}, {"mail", "127.0.0.1:9092"}, {"shop", "127.0.0.1:9093"}}

// fake is one fake served: its name, handler and address ("" for a free port).
type fake struct {
	name, addr string
	h          http.Handler
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("oncebox-fakes", flag.ContinueOnError)
	stripeDelay := fs.Duration("stripe-delay", 0, "hold each PaymentIntent creation this long before answering (a slow vendor)")
	checkout := fs.Bool("checkout", false, "also serve examples/checkout's pay, mail and shop services on 127.0.0.1:9091-9093")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fakes := []fake{
		{"stripe", "", slowPaymentIntents(fakestripe.New(fakestripe.Config{Logger: logger, AnyAccount: true}), *stripeDelay)},
		{"sendgrid", "", fakesendgrid.New(fakesendgrid.Config{ActivityRatePerMinute: -1, Logger: logger})},
		{"webhook", "", fakewebhook.New(fakewebhook.Config{HonourKeys: true})},
	}
	if *checkout {
		for _, c := range checkoutAddrs {
			fakes = append(fakes, fake{c.name, c.addr, fakewebhook.New(fakewebhook.Config{HonourKeys: true})})
		}
	}
	return serveFakes(ctx, fakes)
}

// serveFakes serves each fake until ctx ends or one fails.
func serveFakes(ctx context.Context, fakes []fake) error {
	errs := make(chan error, len(fakes))
	var servers []*http.Server
	for _, f := range fakes {
		l, err := net.Listen("tcp", cmp.Or(f.addr, "127.0.0.1:0"))
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
