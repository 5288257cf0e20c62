// The scripted model for the Agents SDK: a custom Model whose getResponse asks the Brain
// for its next turn, from the function_call_result items after its last output.
import { setTracingDisabled, Usage } from "@openai/agents";

setTracingDisabled(true); // no trace export: no network, no key

function textOf(output) {
  if (typeof output === "string") return output;
  if (Array.isArray(output)) return output.map((o) => o.text ?? "").join("\n");
  return output?.text ?? JSON.stringify(output);
}

function resultsSinceLastTurn(input) {
  if (typeof input === "string") return [];
  const out = [];
  for (let i = input.length - 1; i >= 0; i--) {
    const item = input[i];
    if (item.type === "function_call" || (item.type === "message" && item.role === "assistant")) break;
    if (item.type === "function_call_result") out.unshift(textOf(item.output));
  }
  return out;
}

export class ScriptedModel {
  constructor(brain) {
    this.brain = brain;
  }

  async getResponse(request) {
    const move = this.brain.turn(resultsSinceLastTurn(request.input));
    const output =
      move.type === "text"
        ? [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: move.text }] }]
        : [{ type: "function_call", callId: move.id, name: move.name, arguments: JSON.stringify(move.args), status: "completed" }];
    return { usage: new Usage(), output };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse() {
    throw new Error("the scripted model does not stream");
  }
}

export async function run(agent, { url, headers, conversationId, prompt, brain }) {
  return agent.runAgent({ url, headers, conversationId, prompt, model: new ScriptedModel(brain) });
}
