// Package fakestripe is a stateful fake of Stripe's HTTP API (payment intents
// and refunds) for tests, chaos runs and `oncebox dev`.
//
// It speaks the real wire protocol well enough that the unmodified
// github.com/stripe/stripe-go/v79 SDK works against it when pointed at an
// httptest.Server, and it keeps every object it creates so tests can count side
// effects (CreatedCount, ByTag, PaymentIntents, Refunds).
//
// Endpoints (all require "Authorization: Bearer <key>", else 401):
//
//   - POST /v1/payment_intents: amount, currency, customer, payment_method,
//     confirm, capture_method, description, metadata[k]. Confirmed with a
//     payment method it succeeds with a latest_charge "ch_..."; the test
//     payment methods pm_card_chargeDeclined and pm_card_visa_chargeDeclined
//     answer 402 card_error card_declined/generic_decline (the
//     ...ChargeDeclinedInsufficientFunds ones insufficient_funds) and, as on
//     Stripe, leave a payment intent behind in status requires_payment_method,
//     which CreatedCount and ByTag include. Unknown parameters answer 400
//     parameter_unknown; the Stripe parameters the fake does not model are
//     accepted and ignored.
//   - POST /v1/refunds: payment_intent or charge, amount (defaults to what is
//     left), reason, metadata[k]; refused with 400 when the payment intent has
//     no successful charge or the amount exceeds what is left to refund.
//   - GET /v1/payment_intents/{id}, /v1/refunds/{id}, /v1/charges/{id}.
//   - GET /v1/payment_intents and /v1/refunds: lists, newest first, with
//     created[gte|gt|lte|lt], limit (1..100, default 10), starting_after,
//     ending_before; refunds also filter on payment_intent and charge. Lists
//     are not lagged.
//   - GET /v1/payment_intents/search: query clauses metadata["k"]:"v",
//     status:"x", currency:"usd", customer:"cus_x", amount:123 (and >, <, >=,
//     <= on amount and created, "-" to negate) joined by AND or by OR; limit and
//     page. Only objects at least SearchLag old are visible. Refunds have no
//     search endpoint, as on Stripe.
//
// Idempotency follows Stripe: a POST with an Idempotency-Key stores the
// endpoint, a hash of the parameters, and the status and body of the answer
// once the endpoint runs (402, 400 for a refused refund, and an injected 500
// included) and replays them for the same key and parameters with
// "Idempotent-Replayed: true". The same key with other parameters or another
// endpoint answers 400 idempotency_error; the same key while its first request
// still runs answers 409 idempotency_key_in_use. Validation errors, 401s, 429s
// and 409s store nothing. ExpireIdempotencyKeys forgets every key, as if 24
// hours had passed.
//
// Faults for POSTs are queued with InjectFault or drawn at random with
// SetRandomFaults: a stored 500, a 429 with Retry-After, a 409, a dropped
// connection after the object was created (FaultDropAfterCreate), a hang after
// the object was created (FaultHang), and a dropped connection before anything
// happened (FaultDropBeforeCreate).
//
// Beware of one behaviour of net/http that is not the fake's: when the server
// drops a kept-alive connection without answering, http.Transport silently
// resends a request that carries an Idempotency-Key header (it counts such a
// request as replayable). The resend then meets the stored response (after
// FaultDropAfterCreate) or creates the object (after FaultDropBeforeCreate),
// and the caller sees success. Use a transport with DisableKeepAlives when a
// test needs the caller to see the dropped connection.
//
// Use it from a test:
//
//	fake := fakestripe.New(fakestripe.Config{})
//	srv := httptest.NewServer(fake)
//	defer srv.Close()
//	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
//		URL:               stripe.String(srv.URL),
//		HTTPClient:        srv.Client(),
//		MaxNetworkRetries: stripe.Int64(0),
//	})
//	sc := client.New("sk_test_x", &stripe.Backends{API: b, Connect: b, Uploads: b})
//	// sc.PaymentIntents.New(...), then fake.CreatedCount(), fake.ByTag("oncebox_op", id)
//
// # A test kit, and why it is public
//
// This package is public on purpose: it is oncebox's test kit for users as much as
// for oncebox itself. An application that embeds oncebox (or an agent that calls it)
// can run its own tests against this fake instead of Stripe, and assert on what the
// fake recorded rather than on logs, exactly as oncebox's tests do. `oncebox dev`
// serves it in-process for each vendor without credentials, and the chaos harness
// injects its faults. It imports no test framework, so the oncebox binary can link it.
// Its exported names follow the same compatibility rules as the rest of oncebox; what
// it models of the vendor is listed above and in docs/vendors.md.
package fakestripe
