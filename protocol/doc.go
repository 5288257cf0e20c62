// Package protocol is what an agent and oncebox agree on, with no database behind it:
// the op as the HTTP API returns it, the names of an op's statuses, the rules of an
// idempotency key and the form of an op's id, the built-in tools' names and argument
// types, and the problem document and problem types of the server's refusals.
//
// It imports nothing beyond the standard library, so the Go client (package client),
// which an agent embeds, links neither pgx nor River. The server side names the same
// definitions, with no alias of its own: an op's Status, NormalizeKey, the tools'
// argument types, and the Problem every refusal of the HTTP API is.
package protocol
