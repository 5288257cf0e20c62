// LangChain JS: a `createAgent` agent with oncebox's tools through the MCP adapters
// (`@langchain/mcp-adapters`). Copy runAgent into your app and pass your chat model;
// CI passes a scripted one (scripted.mjs).
import { MultiServerMCPClient } from "@langchain/mcp-adapters";
import { createAgent } from "langchain";

/**
 * runAgent connects to oncebox's /mcp with an agent token and the conversation's id
 * (your LangGraph thread_id: the same across re-runs of the user's task) and runs one
 * agent with oncebox's tools.
 */
export async function runAgent({ url, headers, prompt, model }) {
  const client = new MultiServerMCPClient({
    mcpServers: { oncebox: { transport: "http", url, headers } },
    // The adapters' default; with true, tools are named oncebox__stripe_payment_intent
    // for the model and the adapter calls oncebox by the name it listed.
    prefixToolNameWithServerName: false,
  });
  try {
    const tools = await client.getTools();
    const agent = createAgent({ model, tools });
    const state = await agent.invoke({ messages: [{ role: "user", content: prompt }] }, { recursionLimit: 20 });
    return state.messages.at(-1)?.content;
  } finally {
    await client.close();
  }
}
