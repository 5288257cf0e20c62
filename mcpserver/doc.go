// Package mcpserver exposes oncebox's tools to models over the Model Context Protocol,
// with the official Go MCP SDK.
//
// The four built-in tools are offered as stripe_payment_intent, stripe_refund,
// sendgrid_mail and webhook_post (MCP clients do not all accept dots in tool names).
// Their input schemas describe the tool's arguments and nothing else: there is no
// idempotency key for the model to fill in. The server mints the key itself:
//
//   - from the conversation id and the tool call id, when the client sends the tool
//     call id in the request's _meta ("oncebox/tool_call_id" or "tool_call_id"), so a
//     framework that re-sends the same tool call gets the same op;
//   - otherwise from the conversation and the payload's fingerprint, so the same call
//     with the same arguments in the same conversation is done once.
//
// The conversation is the _meta "oncebox/conversation_id" (or "conversation_id") when
// sent, else the MCP session id, else an id drawn once per *mcp.Server (one stdio
// process). Clients that may reconnect mid-conversation should send the conversation
// id, since a new MCP session has a new session id.
//
// Each tool call records the op with outbox.Outbox.Enqueue and waits (Config.Wait) for
// the vendor's answer. The text of the result tells the model plainly what happened:
// done now, already done earlier and not repeated, still pending, refused by the
// vendor, awaiting a person's approval, or held for review. The structured content is
// the op as the HTTP API returns it.
//
// MCPServer builds the server of one tenant (for stdio or in-process use), HTTPHandler
// serves streamable HTTP for every tenant with "Authorization: Bearer <token>", and
// RunStdio serves one tenant over standard input and output (`oncebox mcp`).
package mcpserver
