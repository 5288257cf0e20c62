// make agent-frameworks: each framework's recipe, its agent loop driven by a scripted
// model, against a real `oncebox serve` and oncebox's fake vendors. Exit 1, naming what
// went wrong, when a framework's agent made a second side effect or read an unclear answer.
//
//   DATABASE_URL=postgres://... ONCEBOX_BIN=../../bin/oncebox ONCEBOX_FAKES_BIN=../../bin/oncebox-fakes node ci.mjs [framework ...]
import * as oncebox from "./harness/oncebox.mjs";
import { runFramework } from "./harness/scenario.mjs";

const frameworks = {
  "ai-sdk": async () => [await import("./ai-sdk/agent.mjs"), await import("./ai-sdk/scripted.mjs")],
  "langchain-js": async () => [await import("./langchain-js/agent.mjs"), await import("./langchain-js/scripted.mjs")],
  "openai-agents-js": async () => [await import("./openai-agents-js/agent.mjs"), await import("./openai-agents-js/scripted.mjs")],
  mastra: async () => [await import("./mastra/agent.mjs"), await import("./mastra/scripted.mjs")],
};

const databaseURL = process.env.DATABASE_URL ?? "";
if (!databaseURL) {
  console.error("agent-frameworks: set DATABASE_URL to a Postgres that oncebox may migrate");
  process.exit(2);
}
const names = process.argv.length > 2 ? process.argv.slice(2) : Object.keys(frameworks);
const deadline = setTimeout(() => {
  console.error("agent-frameworks: FAIL: the run took longer than 5 minutes");
  for (const c of oncebox.children) c.kill("SIGKILL");
  process.exit(1);
}, 300_000);

const problems = [];
const started = Date.now();
let ob;
try {
  ob = await oncebox.start(databaseURL);
  console.log(`oncebox serve at ${ob.base}, fake Stripe at ${ob.stripe}`);
  for (const name of names) {
    if (!frameworks[name]) throw new Error(`no recipe named ${name} (${Object.keys(frameworks).join(", ")})`);
    const t0 = Date.now();
    const [agent, scripted] = await frameworks[name]();
    console.log(`${name}:`);
    problems.push(...(await runFramework(ob, name, (opts) => scripted.run(agent, opts))));
    console.log(`  ${name}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
} catch (err) {
  problems.push(`the run failed: ${err?.stack ?? err}`);
}
await oncebox.stop();
clearTimeout(deadline);
const secs = ((Date.now() - started) / 1000).toFixed(1);
if (problems.length > 0) {
  // The side effects first: they are what the run is for.
  const dup = problems.filter((p) => p.includes("a second side effect"));
  problems.sort((a, b) => Number(b.includes("a second side effect")) - Number(a.includes("a second side effect")));
  if (dup.length > 0) console.error(`agent-frameworks: FAIL: a second side effect at the fake Stripe (${dup.map((p) => p.split(":")[0]).join(", ")})`);
  console.error(`agent-frameworks: FAIL (${secs} s):\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`agent-frameworks: ok (${secs} s): ${names.join(", ")}: one PaymentIntent each, one refund after approval, nothing past the budget`);
process.exit(0);
