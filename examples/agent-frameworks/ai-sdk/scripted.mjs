// The scripted model for the AI SDK: MockLanguageModelV4 from ai/test, whose turns the
// Brain (harness/scenario.mjs) decides from the tool results in the prompt the SDK sends.
import { MockLanguageModelV4 } from "ai/test";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

// resultsSinceLastTurn: the tool-result parts after the last assistant message, as text.
function resultsSinceLastTurn(prompt) {
  const out = [];
  for (let i = prompt.length - 1; i >= 0 && prompt[i].role !== "assistant"; i--) {
    if (prompt[i].role !== "tool") continue;
    for (const part of prompt[i].content) {
      if (part.type === "tool-result") out.unshift(textOf(part.output));
    }
  }
  return out;
}

function textOf(output) {
  if (output.type === "text" || output.type === "error-text") return output.value;
  if (output.type === "content") return output.value.map((c) => c.text ?? "").join("\n");
  return JSON.stringify(output.value);
}

export function scriptedModel(brain) {
  return new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      const move = brain.turn(resultsSinceLastTurn(prompt));
      if (move.type === "text") {
        return { content: [{ type: "text", text: move.text }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
      }
      return {
        content: [{ type: "tool-call", toolCallId: move.id, toolName: move.name, input: JSON.stringify(move.args) }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage,
        warnings: [],
      };
    },
  });
}

export async function run(agent, { url, headers, prompt, brain }) {
  return agent.runAgent({ url, headers, prompt, model: scriptedModel(brain) });
}
