package fakestripe_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/oncebox/oncebox/vendors/fakestripe"
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
