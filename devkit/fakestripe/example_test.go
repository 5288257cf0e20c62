package fakestripe_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/oncebox/oncebox/devkit/fakestripe"
)

// Example points the real stripe-go client at the fake, creates a payment
// intent twice under one idempotency key, and counts the side effects.
func Example() {
	fake := fakestripe.New(fakestripe.Config{})
	srv := httptest.NewServer(fake)
	defer srv.Close()

	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(srv.URL),
		HTTPClient:        srv.Client(),
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	sc := client.New("sk_test_x", &stripe.Backends{API: b, Connect: b, Uploads: b})

	for range 2 {
		params := &stripe.PaymentIntentParams{
			Amount:        stripe.Int64(1500),
			Currency:      stripe.String("usd"),
			PaymentMethod: stripe.String("pm_card_visa"),
			Confirm:       stripe.Bool(true),
		}
		params.AddMetadata("oncebox_op", "op-1")
		params.SetIdempotencyKey("op-1/charge/0")
		pi, err := sc.PaymentIntents.New(params)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(pi.Status, "replayed:", pi.LastResponse.Header.Get("Idempotent-Replayed") == "true")
	}
	pis, _ := fake.ByTag("oncebox_op", "op-1")
	fmt.Println("side effects:", fake.CreatedCount(), "tagged:", len(pis))
	// Output:
	// succeeded replayed: false
	// succeeded replayed: true
	// side effects: 1 tagged: 1
}

// ExampleServer_SetEvents makes the fake POST signed webhook events to a receiver,
// as Stripe does to a webhook endpoint, for the payment intents created from then on.
func ExampleServer_SetEvents() {
	var (
		mu    sync.Mutex
		types []string
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(body, &ev)
		mu.Lock()
		defer mu.Unlock()
		types = append(types, ev.Type+" signed:"+fmt.Sprint(r.Header.Get("Stripe-Signature") != ""))
	}))
	defer receiver.Close()

	fake := fakestripe.New(fakestripe.Config{})
	if err := fake.SetEvents(&fakestripe.EventsConfig{
		Config: fakestripe.EventDelivery{URL: receiver.URL},
		Secret: "whsec_test",
	}); err != nil {
		fmt.Println("error:", err)
		return
	}
	defer func() { _ = fake.SetEvents(nil) }()
	srv := httptest.NewServer(fake)
	defer srv.Close()

	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL: stripe.String(srv.URL), HTTPClient: srv.Client(), MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	sc := client.New("sk_test_x", &stripe.Backends{API: b, Connect: b, Uploads: b})
	if _, err := sc.PaymentIntents.New(&stripe.PaymentIntentParams{Amount: stripe.Int64(1500), Currency: stripe.String("usd"),
		PaymentMethod: stripe.String("pm_card_visa"), Confirm: stripe.Bool(true)}); err != nil {
		fmt.Println("error:", err)
		return
	}
	for range 1000 {
		if _, delivered, _ := fake.EventStats(); delivered == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Println(strings.Join(types, "\n"))
	// Output:
	// payment_intent.created signed:true
	// payment_intent.succeeded signed:true
}
