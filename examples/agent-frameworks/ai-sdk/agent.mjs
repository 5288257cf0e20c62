// The Vercel AI SDK (`ai`) with its MCP client (`@ai-sdk/mcp`) and oncebox's tools.
// Copy runAgent into your app and pass your model (openai("gpt-5"), anthropic(...));
// CI passes a scripted one (scripted.mjs).
import { createMCPClient } from "@ai-sdk/mcp";
import { generateText, stepCountIs } from "ai";

/**
 * runAgent connects to oncebox's /mcp with an agent token and the conversation's id
 * (your chat's id: the same across re-runs of the user's task, so that a re-planned call
 * in other words is the same op) and runs one agent loop with oncebox's tools.
 */
export async function runAgent({ url, headers, prompt, model }) {
  const mcp = await createMCPClient({ transport: { type: "http", url, headers } });
  try {
    const tools = await mcp.tools();
    const result = await generateText({
      model,
      tools,
      prompt,
      stopWhen: stepCountIs(8),
      maxRetries: 0,
    });
    return result.text;
  } finally {
    await mcp.close();
  }
}

// `ONCEBOX_URL=http://127.0.0.1:8080 ONCEBOX_TOKEN=obx_... node ai-sdk/agent.mjs` lists the tools a model gets.
if (import.meta.url === `file://${process.argv[1]}`) {
  const mcp = await createMCPClient({
    transport: { type: "http", url: `${process.env.ONCEBOX_URL}/mcp`, headers: { Authorization: `Bearer ${process.env.ONCEBOX_TOKEN}` } },
  });
  console.log(Object.keys(await mcp.tools()).join("\n"));
  await mcp.close();
}
