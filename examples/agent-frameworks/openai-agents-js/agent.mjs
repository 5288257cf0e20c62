// The OpenAI Agents SDK for JavaScript (`@openai/agents`) with oncebox's tools through
// MCPServerStreamableHttp. Copy runAgent into your app (the model defaults to OpenAI's);
// CI passes a scripted Model (scripted.mjs).
import { Agent, MCPServerStreamableHttp, run } from "@openai/agents";

/**
 * runAgent connects to oncebox's /mcp with an agent token and runs one agent. The
 * conversation (your app's id for the user's task, the same across re-runs) goes in each
 * call's _meta through the SDK's toolMetaResolver, read from the run's context.
 */
export async function runAgent({ url, headers, conversationId, prompt, model }) {
  const { "Oncebox-Conversation-Id": _unused, ...auth } = headers;
  const server = new MCPServerStreamableHttp({
    url,
    name: "oncebox",
    requestInit: { headers: auth },
    // oncebox answers a slow vendor within its MCP wait (10 s by default) with "not
    // confirmed yet"; a client timeout below it would turn that answer into an error.
    clientSessionTimeoutSeconds: 30,
    toolMetaResolver: ({ runContext }) => ({ "oncebox/conversation_id": runContext.context.conversationId }),
  });
  await server.connect();
  try {
    const agent = new Agent({
      name: "billing",
      instructions: "You take payments and refunds for the shop's orders with the tools you have.",
      mcpServers: [server],
      ...(model ? { model } : {}),
    });
    const result = await run(agent, prompt, { context: { conversationId }, maxTurns: 10 });
    return result.finalOutput;
  } finally {
    await server.close();
  }
}
