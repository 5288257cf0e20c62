// Package fakewebhook is a stateful fake webhook receiver for tests, chaos runs
// and `oncebox dev`.
//
// It accepts a JSON POST on any path and records it as an Effect: that is the
// side effect the tests count. Every effect answers 200
// {"id":"<effect id>","ok":true} with "X-Request-Id: <effect id>".
//
// With Config.HonourKeys it deduplicates by the Idempotency-Key header, as a
// receiver honouring the IETF Idempotency-Key draft would: the first POST with
// a key stores its answer (status and body) and every later POST with the same
// key replays it with "Idempotent-Replayed: true" and performs nothing; a POST
// whose key is still in flight (held by SetBlock or FaultHangAfterEffect)
// answers 409. Without it, every accepted POST is another effect.
//
// Other endpoints:
//
//   - GET /_lookup?oncebox_op=<id> answers {"objects":[{"id":..,"created":..,
//     "status":200,"body":{"id":..,"ok":true}}]} for the effects whose Oncebox-Op
//     header was <id> and that are at least Config.LookupLag old (created is RFC
//     3339; status and body are the answer a POST that made the effect gets).
//   - GET /_effects answers {"effects":[...]} with every effect, so a test that
//     runs the dispatch worker in another process can count them (see
//     FetchEffects).
//
// A body that is not JSON answers 400 and performs nothing. Faults for POSTs
// are queued with InjectFault or drawn at random with SetRandomFaults: a
// dropped connection before or after the effect, a hang after the effect, a
// 500 with or without the effect, a 429 with Retry-After, a 409 and a refusal
// with a chosen 4xx status. Config.RefusePrefix refuses every POST to the paths
// that begin with it (422, nothing performed), for a step that fails for good.
//
// Beware of one behaviour of net/http that is not the fake's: when the server
// drops a kept-alive connection without answering, http.Transport silently
// resends a request that carries an Idempotency-Key header and a rewindable
// body (http.Request.GetBody). The webhook adapter clears GetBody for that
// reason; a test that calls the fake with its own client should do the same or
// disable keep-alives.
//
// Use it from a test:
//
//	fake := fakewebhook.New(fakewebhook.Config{HonourKeys: true})
//	srv := httptest.NewServer(fake)
//	defer srv.Close()
//	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect})
//	// POST srv.URL+"/anything" ..., then fake.EffectCount(), fake.EffectsFor(opID)
//
// # A test kit, and why it is public
//
// This package is public on purpose: it is oncebox's test kit for users as much as
// for oncebox itself. An application that embeds oncebox (or an agent that calls it)
// can run its own tests against this fake instead of a real receiver, and assert on
// what the fake recorded rather than on logs, exactly as oncebox's tests do. `oncebox dev`
// serves it in-process for each vendor without credentials, and the chaos harness
// injects its faults. It imports no test framework, so the oncebox binary can link it.
// Its exported names follow the same compatibility rules as the rest of oncebox; what
// it models of the vendor is listed above and in docs/vendors.md.
package fakewebhook
