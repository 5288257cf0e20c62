// Package fakesendgrid is a stateful fake of SendGrid's v3 HTTP API for tests.
//
// It speaks the real wire protocol well enough that the unmodified
// github.com/sendgrid/sendgrid-go SDK works against it when pointed at an
// httptest.Server, and it records every accepted email so tests can count side
// effects. Like the real service it has no idempotency of any kind: every
// POST /v3/mail/send that is accepted is another email, whatever headers it
// carries.
//
// Endpoints:
//
//   - POST /v3/mail/send validates the v3 JSON body and answers 202 with a new
//     X-Message-Id, or 400 with {"errors":[...]} (nothing stored), or 413 for a
//     body over 30 MB. Gzip bodies (Content-Encoding: gzip) are accepted.
//   - GET /v3/messages is the Email Activity search: limit 1..1000 and a query
//     made of unique_args['k']="v", msg_id LIKE 'prefix%' (SQL LIKE, so _ is
//     a wildcard too) and last_event_time BETWEEN TIMESTAMP "t1" AND
//     TIMESTAMP "t2" joined by AND (parentheses allowed). It answers one row
//     per "to" recipient, newest message first, only for messages older than
//     the activity lag, within a per-minute rate limit, or 403 when
//     SetActivityForbidden is on.
//   - GET /v3/messages/{msg_id} returns one row's details, including
//     unique_args and categories, under the same lag, limit and 403 rules.
//
// Every endpoint requires an "Authorization: Bearer <key>" header.
//
// Faults for POST /v3/mail/send are queued with InjectFault or drawn at random
// with SetRandomFaults: a dropped connection after the email was stored, a hang,
// 429, 500 with or without the email stored, and a dropped connection before
// anything was stored.
//
// Use it from a test:
//
//	fake := fakesendgrid.New(fakesendgrid.Config{})
//	srv := httptest.NewServer(fake)
//	defer srv.Close()
//	req := sendgrid.GetRequest("SG.key", "/v3/mail/send", srv.URL)
//	req.Method = "POST"
//	req.Body = mail.GetRequestBody(m)
//	resp, err := sendgrid.MakeRequest(req)
//	// fake.SendCount() == 1, resp.Headers["X-Message-Id"][0] == fake.Messages()[0].XMessageID
//
// # A test kit, and why it is public
//
// This package is public on purpose: it is oncebox's test kit for users as much as
// for oncebox itself. An application that embeds oncebox (or an agent that calls it)
// can run its own tests against this fake instead of SendGrid, and assert on what the
// fake recorded rather than on logs, exactly as oncebox's tests do. `oncebox dev`
// serves it in-process for each vendor without credentials, and the chaos harness
// injects its faults. It imports no test framework, so the oncebox binary can link it.
// Its exported names follow the same compatibility rules as the rest of oncebox; what
// it models of the vendor is listed above and in docs/vendors.md.
package fakesendgrid
