// The scripted model for Mastra: the AI SDK's MockLanguageModelV4 (Mastra runs AI SDK
// models), its tool names mapped to the ones Mastra offers (oncebox_stripe_payment_intent).
import { MockLanguageModelV4 } from "ai/test";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

function textOf(output) {
  if (output.type === "text" || output.type === "error-text") return output.value;
  if (output.type === "content") return output.value.map((c) => c.text ?? "").join("\n");
  return typeof output.value === "string" ? output.value : JSON.stringify(output.value);
}

function resultsSinceLastTurn(prompt) {
  const out = [];
  for (let i = prompt.length - 1; i >= 0 && prompt[i].role !== "assistant"; i--) {
    if (prompt[i].role !== "tool") continue;
    for (const part of prompt[i].content) if (part.type === "tool-result") out.unshift(textOf(part.output));
  }
  return out;
}

function offered(tools, name) {
  const names = (tools ?? []).map((t) => t.name);
  return names.find((n) => n === name) ?? names.find((n) => n.endsWith(`_${name}`)) ?? name;
}

function answer(brain, { prompt, tools }) {
  const move = brain.turn(resultsSinceLastTurn(prompt));
  if (move.type === "text") {
    return { content: [{ type: "text", text: move.text }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
  }
  return {
    content: [{ type: "tool-call", toolCallId: move.id, toolName: offered(tools, move.name), input: JSON.stringify(move.args) }],
    finishReason: { unified: "tool-calls", raw: "tool_calls" },
    usage,
    warnings: [],
  };
}

// Mastra's agent loop streams: each answer is also given as a stream of parts.
function streamOf(result) {
  const parts = [{ type: "stream-start", warnings: [] }];
  for (const c of result.content) {
    if (c.type === "text") {
      parts.push({ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: c.text }, { type: "text-end", id: "t" });
    } else {
      parts.push(c);
    }
  }
  parts.push({ type: "finish", finishReason: result.finishReason, usage: result.usage });
  return new ReadableStream({
    start(controller) {
      for (const p of parts) controller.enqueue(p);
      controller.close();
    },
  });
}

export function scriptedModel(brain) {
  return new MockLanguageModelV4({
    doGenerate: async (options) => answer(brain, options),
    doStream: async (options) => ({ stream: streamOf(answer(brain, options)) }),
  });
}

export async function run(agent, { url, headers, prompt, brain }) {
  return agent.runAgent({ url, headers, prompt, model: scriptedModel(brain) });
}
