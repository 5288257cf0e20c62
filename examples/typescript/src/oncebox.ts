// Connecting to oncebox with the official MCP TypeScript SDK, over streamable HTTP or
// over stdio (`oncebox mcp`), and calling a tool.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/** What oncebox answers a tool call with (structuredContent), in part. */
export interface OpView {
  id: string;
  key: string;
  status: string;
  replayed: boolean;
  vendor_ref?: string;
  /**
   * Set when the call was matched to the op by the tool's identity fields (for a
   * payment: amount, currency, customer, payment method) although other arguments, such
   * as the description, differ: the call was not executed.
   */
  matched?: { identity: string[]; differed: string[] };
}

/**
 * connectHTTP opens an MCP session to oncebox's /mcp with an agent token. A client
 * that knows its conversation names it with the Oncebox-Conversation-Id header (or
 * `?conversation_id=` on the URL, or `_meta` on each call); without one, identical
 * calls within the tool's dedupe window are one op anyway.
 */
export async function connectHTTP(baseURL: string, token: string, conversationId?: string): Promise<Client> {
  const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
  if (conversationId) {
    headers["Oncebox-Conversation-Id"] = conversationId;
  }
  const transport = new StreamableHTTPClientTransport(new URL("/mcp", baseURL), { requestInit: { headers } });
  const client = new Client({ name: "oncebox-ts-example", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

/**
 * connectStdio starts `oncebox mcp --tenant T` and opens an MCP session over its
 * standard input and output. env is the environment of `oncebox serve` (DATABASE_URL,
 * the vendor keys that enable the tools, ONCEBOX_SEAL_KEY with mail).
 */
export async function connectStdio(binary: string, tenant: string, env: Record<string, string>): Promise<Client> {
  const transport = new StdioClientTransport({ command: binary, args: ["mcp", "--tenant", tenant], env, stderr: "inherit" });
  const client = new Client({ name: "oncebox-ts-example", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

/** callTool calls an oncebox tool and returns the sentence for the model and the op. */
export async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  meta?: Record<string, string>,
): Promise<{ text: string; op: OpView; isError: boolean }> {
  const res = await client.callTool({ name, arguments: args, ...(meta ? { _meta: meta } : {}) });
  const content = (res.content ?? []) as Array<{ type: string; text?: string }>;
  const text = content.filter((c) => c.type === "text").map((c) => c.text ?? "").join("\n");
  return { text, op: res.structuredContent as unknown as OpView, isError: Boolean(res.isError) };
}
