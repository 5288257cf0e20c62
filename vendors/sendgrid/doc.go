// Package sendgrid is oncebox's SendGrid adapter: it dispatches sendgrid.mail ops
// through SendGrid's v3 mail/send with the official sendgrid-go SDK and finds
// them again through the Email Activity API. *Vendor satisfies vendorapi.Vendor.
//
// SendGrid has no idempotency of any kind: every POST /v3/mail/send that reaches
// it is another email. So the adapter
//
//   - sends exactly one request per Dispatch, never retrying by itself, with a
//     fresh request (a *sendgrid.Client writes into its request, so one is never
//     shared) through rest.Client.SendWithContext, bounded by Config.Timeout;
//   - sends no Idempotency-Key header: Go's net/http takes a POST carrying one as
//     idempotent and silently resends it on a fresh connection when a kept-alive
//     one dies, which would be a second email nobody hears about;
//   - tags every email with the op's id in custom_args (vendorapi.TagKey, on the
//     message and on its one personalization), so a reconciler can find it;
//   - classifies every failure: 400, 401, 403 and 413 are permanent refusals
//     (SendGrid's {"errors":[...]} body is stored); 429 is retryable after
//     X-RateLimit-Reset; a request that provably never left (dial error,
//     connection refused, cancelled before it was written) is retryable; a 5xx,
//     any other status, or a timeout, reset or EOF once the request was written
//     (known from net/http/httptrace) is an unknown outcome, reconciled and never
//     resent blindly.
//
// A success stores the X-Message-Id as the op's vendor reference and
// {"message_id": "<X-Message-Id>", "status": 202} as its result.
//
// Lookup asks GET /v3/messages for unique_args['oncebox_op']="<op id>" and
// groups the rows (one per recipient) by X-Message-Id, so an email to three
// recipients is one object. The Email Activity API is a paid add-on (without it
// Lookup's error wraps vendorapi.ErrLookupUnavailable), lags behind sends
// (Config.LookupLag) and allows about 6 requests a minute, which a limiter shared
// by every call of one Vendor respects. ListMessages lists a time window for the
// finance report.
//
// The API key is never logged and never put in an error or a result.
//
// Use it:
//
//	sg, err := sendgrid.New(sendgrid.Config{APIKey: os.Getenv("SENDGRID_API_KEY")})
//	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Vendors: []vendorapi.Vendor{sg}})
//
// Tests point BaseURL at an httptest.Server running fakesendgrid.
package sendgrid
