// Package stripe is the oncebox vendor adapter for Stripe: it dispatches the
// stripe.payment_intent and stripe.refund tools through stripe-go
// (github.com/stripe/stripe-go/v79), classifies every failure into oncebox's
// three outcome classes, and finds objects again by their oncebox_op tag.
//
// # Requests
//
// The adapter builds its own stripe-go backend and client (never stripe-go's
// globals). Every create sends:
//
//   - Idempotency-Key: the op's derived vendor key (vendorapi.VendorKey), never
//     stripe-go's random one, so retries, restarts and other processes send
//     the same key and Stripe deduplicates them for 24 hours;
//   - metadata: the caller's metadata plus oncebox_op = the op id (the tag);
//   - for a payment intent with confirm: automatic_payment_methods[enabled]
//     and [allow_redirects]=never, since a server-side confirmation cannot
//     follow a redirect and Stripe otherwise asks for a return_url.
//
// The parameters are a pure function of the op's args and id, as Stripe's
// idempotency needs: the same key with other parameters is refused.
//
// stripe-go's own in-call retries are off by default (Config.MaxNetworkRetries
// = 0): every retry goes through oncebox's state machine with the same derived
// key, so each attempt is recorded and the job timeout holds. One resend
// still happens below stripe-go: net/http resends a POST carrying an
// Idempotency-Key when a kept-alive connection turns out dead. That is safe
// with Stripe, which answers the resend from its idempotency store.
//
// The stored result is a summary (PaymentIntentSummary, RefundSummary): id,
// object, amount, currency, status, latest_charge or payment_intent/charge.
// It never holds the client_secret. The vendor ref is the object's id.
//
// # Outcomes
//
//   - 402 card_error (a decline) and 400 invalid_request_error: permanent;
//     the error JSON is stored without any "...secret" field. A declined
//     confirmation leaves a payment intent behind in requires_payment_method.
//   - 400 idempotency_error: permanent with Bug set (the op goes to
//     needs_review): oncebox sent one key with two sets of parameters.
//   - 409 idempotency_key_in_use: retryable.
//   - 429: retryable after Retry-After (2 s when absent).
//   - 401: retryable with code "authentication": Stripe stores nothing for it,
//     and a bad key is for an operator to fix, so once the attempts are
//     exhausted the op goes to needs_review rather than failed.
//   - 403 (a Connect account the platform cannot reach, account_invalid, or a
//     restricted key without the permission): permanent with Stripe's code
//     (permission_denied when it gives none): Stripe stores nothing, and the
//     same request would be refused again, so the op fails with a sentence that
//     says what to fix. Finance reports show such an account's ops unchecked.
//   - any 5xx: unknown, with Replayed set when Stripe answered
//     Idempotent-Replayed: true (a stored 500 replayed: this call did nothing
//     new, and the key is stale).
//   - no answer: retryable when no request was written whole (dial failure,
//     refused connection), unknown once one was (timeout, reset, EOF), as told
//     by net/http/httptrace. An answer stripe-go cannot decode is unknown.
//
// The API key is sent only in the Authorization header; stripe-go's logger is
// silenced (it logs bodies), and the key is scrubbed from every error.
//
// # Lookup
//
// Payment intents are looked up through search (metadata["oncebox_op"]:"<id>")
// and, because search lags (usually under a minute, up to an hour), also
// through a list scan of payment intents created since LookupParams.Since
// minus five minutes, matching the tag here; the results are merged by id.
// LookupLag is then a few seconds; with Config.DisableListScan it is
// Config.SearchLag. Refunds cannot be searched: their lookup lists the
// refunds of the args' payment intent or charge. Lookup returns every tagged
// object with Stripe's status, declined payment intents included; deciding
// what they mean is the reconciler's job.
//
// ListObjects lists every payment intent and refund created in a window, for
// the finance report.
package stripe
