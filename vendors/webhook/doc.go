// Package webhook is the oncebox vendor adapter for generic HTTP tools: it
// POSTs an op's JSON body to an allow-listed target and classifies the answer
// into oncebox's three outcome classes.
//
// A tool call's arguments are
//
//	{"target": "<configured target name>", "path": "/some/path", "body": <any JSON>}
//
// and the adapter sends POST <BaseURL><path> with the body (an absent or null
// body is sent as {}), "Content-Type: application/json",
// "Idempotency-Key: <vendor key>", "Oncebox-Op: <op id>" (the tag) and the
// target's secret header. The tool catalog (package catalog) reuses the adapter
// with one more argument, "method" (GET, POST, PUT, PATCH or DELETE; POST when
// absent): GET and DELETE are sent without a body, and a call made outside an op
// (a catalog read tool) carries no Idempotency-Key and no Oncebox-Op. webhook.post
// itself refuses the field. Only targets named in Config.Targets can be reached,
// and a path cannot leave the target's host.
//
// Outcomes:
//
//   - nothing was sent (dial failure, refused connection, DNS failure, a
//     request that could not be written whole): retryable, code
//     not_sent;
//   - 2xx: success; the vendor ref is X-Request-Id, else the body's "id",
//     else the status; the stored result is {"status":..,"body":..};
//   - 409: retryable (conflict_in_use); 429: retryable with Retry-After;
//   - 3xx (redirects are not followed): permanent http_3xx; 408 and other
//     4xx: permanent http_4xx;
//   - 5xx: unknown (http_5xx), since a receiver may have acted before failing;
//   - a timeout, reset or cancellation once the request may have been written
//     whole: unknown (timeout or connection_lost).
//
// Whether the request was written is learnt with net/http/httptrace: a
// failure before a connection was obtained, or a failed write, is retryable;
// anything later is unknown. The adapter also stops net/http from silently
// resending a POST on a dropped kept-alive connection, which it would
// otherwise do for any request carrying an Idempotency-Key header.
//
// The secret is sent only in its header: it is never logged, and any echo of
// it in a receiver's answer is replaced by "[REDACTED]" before the answer is
// stored or put in an error.
//
// Lookups need Config.LookupPath: GET <BaseURL><LookupPath>?oncebox_op=<op id>
// must answer {"objects":[{"id":..,"created":"<RFC 3339>"}]}, each object
// optionally with "status" (a 2xx) and "body": the answer the call got. An op
// the reconciler settles from an object keeps the result a dispatch stores,
// {"status":<status>,"body":<body>} (200 and the object itself when it gives
// neither), and the object's id as its vendor reference. Without a lookup path
// the reconciler cannot ask the targets, and unknown webhook ops go to review.
// See package fakewebhook for a receiver that speaks all of this.
package webhook
