// Package mcpupstream is oncebox's client of an upstream MCP server, one the tool
// catalog (package catalog) stands in front of: a Session per upstream, over
// streamable HTTP or a stdio program, that lists the upstream's tools, forwards read
// calls, dispatches ops with tools/call and looks up the objects an op made.
//
// A Session connects on its first call, and when its session ends (a stdio program
// that exits, a broken connection) opens it again in the background with backoff.
// Headers go only to the upstream's origin; a stdio program runs in its own process
// group with only PATH, HOME and its configured environment. The upstream's secrets
// (header and environment values, and the ${VAR}s expanded in them) are cut out of
// every error, result and stderr line the session hands on.
//
// A dispatch's answer is kept as it came on the wire (a tap under the SDK catches
// it), bounded by Config.MaxResultBytes; an answer too large or that is no JSON-RPC
// message fails its call alone, the session goes on. Dispatch classifies the answer
// into the outbox's outcome classes (vendorapi.DispatchError): a result is success,
// isError or a JSON-RPC refusal permanent, a call never sent retryable, a lost answer
// unknown.
//
// The package knows nothing of the catalog's file: which upstream tools exist, their
// classes and arguments are the catalog's. Its Observer reports calls and sessions
// for metrics.
package mcpupstream
