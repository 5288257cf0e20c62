// Package mcpserver exposes oncebox's tools to models over the Model Context Protocol,
// with the official Go MCP SDK.
//
// The four built-in tools are offered as stripe_payment_intent, stripe_refund,
// sendgrid_mail and webhook_post (MCP clients do not all accept dots in tool names).
// Their input schemas describe the tool's arguments, plus an optional "occurrence"
// (1 by default) that the model raises only when the user asks to do the same thing
// again; there is no idempotency key for the model to fill in. The server mints the
// key itself:
//
//   - when the client names the conversation (_meta "oncebox/conversation_id" or
//     "conversation_id", else the Oncebox-Conversation-Id header, else the
//     conversation_id query parameter of the URL, else Config.Conversation): from the
//     conversation and the _meta tool call id ("oncebox/tool_call_id" or
//     "tool_call_id") when sent, else from the conversation, the payload's fingerprint
//     and the occurrence;
//   - otherwise, when the tool has a dedupe window (Config.DedupeWindows; by default
//     DefaultDedupeWindow, 24 hours, or the tool's TTL when shorter, for every write
//     and unsafe tool, built-in or extra), identical calls of the tenant (same tool,
//     payload and occurrence) within the window share one key, whichever session or
//     process sends them (outbox.Outbox.KeyInWindow);
//   - otherwise from the MCP session id (or the server instance, over stdio) and the
//     payload's fingerprint.
//
// Each tool call records the op with outbox.Outbox.Enqueue and waits (Config.Wait) for
// the vendor's answer. The text of the result tells the model in one sentence what
// happened, for a new call or a replay: done now, already requested earlier and not
// repeated, not confirmed yet, refused by the vendor, rejected, awaiting a person's
// approval, or held for review (saying whether anything may have been sent). The
// structured content is the op as the HTTP API returns it.
//
// Over HTTP, a client that declares the tasks extension (io.modelcontextprotocol/tasks)
// gets, instead, a task whose id is the op's id at once, and reads and cancels it with
// tasks/get and tasks/cancel (tasks.go; the SDK does not implement the extension yet).
//
// MCPServer builds the server of one tenant (for stdio or in-process use), HTTPHandler
// serves streamable HTTP for every tenant with "Authorization: Bearer <token>" (a 401
// carries WWW-Authenticate: Bearer), and
// RunStdio serves one tenant over standard input and output (`oncebox mcp`).
package mcpserver
