// The scripted model for LangChain: the fake chat model of @langchain/core/testing
// (fakeModel), each of its answers decided by the Brain from the ToolMessages the agent
// put after the model's last message.
import { AIMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";

function textOf(content) {
  if (typeof content === "string") return content;
  return content.map((c) => c.text ?? "").join("\n");
}

function resultsSinceLastTurn(messages) {
  const out = [];
  for (let i = messages.length - 1; i >= 0 && messages[i]._getType() !== "ai"; i--) {
    if (messages[i]._getType() === "tool") out.unshift(textOf(messages[i].content));
  }
  return out;
}

export function scriptedModel(brain, turns = 12) {
  const model = fakeModel();
  for (let i = 0; i < turns; i++) {
    model.respond((messages) => {
      const move = brain.turn(resultsSinceLastTurn(messages));
      if (move.type === "text") return new AIMessage(move.text);
      return new AIMessage({ content: "", tool_calls: [{ name: move.name, args: move.args, id: move.id, type: "tool_call" }] });
    });
  }
  return model;
}

export async function run(agent, { url, headers, prompt, brain }) {
  return agent.runAgent({ url, headers, prompt, model: scriptedModel(brain) });
}
