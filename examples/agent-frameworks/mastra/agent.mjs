// Mastra: an Agent with oncebox's tools through Mastra's MCP client (`@mastra/mcp`).
// Copy runAgent into your app and pass your model; CI passes a scripted one (scripted.mjs).
import { randomUUID } from "node:crypto";
import { Agent } from "@mastra/core/agent";
import { MCPClient } from "@mastra/mcp";

/**
 * runAgent connects to oncebox's /mcp with an agent token and the conversation's id (your
 * Mastra thread id: the same across re-runs of the user's task) and runs one agent. Mastra
 * names the tools serverName_toolName: the model sees oncebox_stripe_payment_intent.
 */
export async function runAgent({ url, headers, prompt, model }) {
  const mcp = new MCPClient({
    // A client per run: Mastra refuses a second MCPClient with the same options unless
    // each has an id of its own.
    id: `oncebox-${randomUUID()}`,
    servers: { oncebox: { url: new URL(url), requestInit: { headers } } },
  });
  try {
    const agent = new Agent({
      id: "billing",
      name: "billing",
      instructions: "You take payments and refunds for the shop's orders with the tools you have.",
      model,
      tools: await mcp.listTools(),
    });
    const result = await agent.generate(prompt, { maxSteps: 8 });
    return result.text;
  } finally {
    await mcp.disconnect();
  }
}
