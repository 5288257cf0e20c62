// The check of the check: ci.mjs run with ONCEBOX_RECIPES_FRESH_IDENTITY=1, every MCP
// connection naming a conversation of its own (as a framework that mints an id per session
// would), so the re-planned payment is a new op. ci.mjs must then fail, saying for every
// framework that the fake Stripe holds a second PaymentIntent; this script fails otherwise.
import { spawnSync } from "node:child_process";

const frameworks = process.argv.length > 2 ? process.argv.slice(2) : ["ai-sdk", "langchain-js", "openai-agents-js", "mastra"];
const res = spawnSync(process.execPath, ["ci.mjs", ...frameworks], {
  env: { ...process.env, ONCEBOX_RECIPES_FRESH_IDENTITY: "1" },
  encoding: "utf8",
  timeout: 300_000,
});
const out = `${res.stdout}\n${res.stderr}`;
const problems = [];
if (res.status !== 1) problems.push(`ci.mjs with a fresh identity per connection exited with ${res.status}, not 1`);
for (const f of frameworks) {
  if (!out.includes(`${f}: one PaymentIntent at the fake Stripe for the order (found 2: a second side effect)`)) {
    problems.push(`${f}: the run did not report the second PaymentIntent`);
  }
}
if (!/^agent-frameworks: FAIL: a second side effect at the fake Stripe/m.test(out)) problems.push("ci.mjs's first failure line does not name the second side effect");
if (problems.length > 0) {
  console.error(out);
  console.error(`agent-frameworks check of the check: FAIL: ${problems.join("; ")}`);
  process.exit(1);
}
console.log(out.split("\n").filter((l) => l.startsWith("agent-frameworks: FAIL: a second side effect")).join("\n"));
console.log(`agent-frameworks check of the check: ok: with a fresh identity per connection, ci.mjs failed on the second PaymentIntent of each of ${frameworks.join(", ")}`);
