// The CI proof of the recipes: a real oncebox server (`oncebox dev`, which runs
// `oncebox serve`'s server with a fake Stripe), the official MCP TypeScript SDK, and one
// payment asked for four times: in two separate MCP sessions over HTTP (no _meta), then
// twice through `oncebox mcp` over stdio, restarted in between. The fake Stripe must
// hold exactly one PaymentIntent for it; the run fails (exit 1) otherwise.
//
//   DATABASE_URL=postgres://... ONCEBOX_BIN=../../bin/oncebox npm run ci
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { resolve } from "node:path";
import { callTool, connectHTTP, connectStdio, type OpView } from "./oncebox.js";

const bin = resolve(process.env.ONCEBOX_BIN ?? "../../bin/oncebox");
const databaseURL = process.env.DATABASE_URL ?? "";
if (!databaseURL) {
  console.error("mcp-clients: set DATABASE_URL to a Postgres that oncebox may migrate (`oncebox dev` and `oncebox mcp` share it)");
  process.exit(2);
}
let devProc: ChildProcess | undefined;
const deadline = setTimeout(() => {
  console.error("mcp-clients: FAIL: the run took longer than 4 minutes");
  devProc?.kill("SIGKILL");
  process.exit(1);
}, 240_000);

const problems: string[] = [];
function check(ok: boolean, what: string) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) problems.push(what);
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const srv = createServer();
    srv.once("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === "object" && addr ? done(addr.port) : fail(new Error("no port"))));
    });
  });
}

// startDev runs `oncebox dev` on databaseURL and reads its banner.
async function startDev(): Promise<{ proc: ChildProcess; base: string; token: string; stripe: string }> {
  const addr = `127.0.0.1:${await freePort()}`;
  const proc = spawn(bin, ["dev"], {
    env: { ...process.env, ONCEBOX_ADDR: addr, ONCEBOX_LOG_LEVEL: "warn", STRIPE_API_KEY: "", SENDGRID_API_KEY: "", ONCEBOX_WEBHOOK_TARGETS: "" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  devProc = proc;
  let out = "";
  return await new Promise((done, fail) => {
    proc.once("exit", (code) => fail(new Error(`oncebox dev exited (${code}) before its banner:\n${out}`)));
    proc.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (!out.includes("Press Ctrl-C")) return;
      const token = /token\s+(obx_\S+)/.exec(out)?.[1];
      const stripe = /Stripe (http:\/\/[0-9.:]+)/.exec(out)?.[1];
      if (!token || !stripe) {
        proc.kill("SIGINT");
        return fail(new Error(`unexpected banner:\n${out}`));
      }
      proc.removeAllListeners("exit");
      done({ proc, base: `http://${addr}`, token, stripe });
    });
  });
}

async function getJSON(url: string, token: string): Promise<any> {
  const res = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

const dev = await startDev();
console.log(`oncebox dev at ${dev.base}, fake Stripe at ${dev.stripe}`);
const stdioEnv: Record<string, string> = {
  DATABASE_URL: databaseURL,
  STRIPE_API_KEY: "sk_test_oncebox_dev",
  STRIPE_API_BASE: dev.stripe,
  ONCEBOX_LOG_LEVEL: "error",
  ONCEBOX_MCP_WAIT: "5s",
};
if (process.env.ONCEBOX_MCP_DEDUPE_WINDOW) stdioEnv.ONCEBOX_MCP_DEDUPE_WINDOW = process.env.ONCEBOX_MCP_DEDUPE_WINDOW;

// One run's payment: a description of its own, so that earlier runs on the same
// database do not count.
const description = `mcp-clients ${randomBytes(6).toString("hex")}`;
const payment = { amount: 4200, currency: "usd", payment_method: "pm_card_visa", confirm: true, description };
const ops: OpView[] = [];
try {
  // Session 1 over HTTP: the tools, then the payment.
  const s1 = await connectHTTP(dev.base, dev.token);
  const { tools } = await s1.listTools();
  const names = tools.map((t) => t.name);
  console.log(`tools: ${names.join(", ")}`);
  check(names.includes("stripe_payment_intent"), "the tools include stripe_payment_intent");
  check(names.every((n) => /^[a-zA-Z0-9_-]{1,64}$/.test(n)), "every tool name matches ^[a-zA-Z0-9_-]{1,64}$");
  const first = await callTool(s1, "stripe_payment_intent", payment);
  console.log(`  session 1: ${first.text}`);
  check(!first.isError && !first.op.replayed, "session 1 over HTTP records the payment");
  ops.push(first.op);
  await s1.close();

  // Session 2 over HTTP, no _meta: a framework retry in a new session.
  const s2 = await connectHTTP(dev.base, dev.token);
  const second = await callTool(s2, "stripe_payment_intent", payment);
  console.log(`  session 2: ${second.text}`);
  check(second.op.replayed && second.op.id === first.op.id, "session 2 over HTTP is a replay of the same op");
  ops.push(second.op);
  await s2.close();

  // oncebox mcp over stdio, twice: the client restarts the server in between.
  for (const round of [1, 2]) {
    const s = await connectStdio(bin, "demo", stdioEnv);
    const r = await callTool(s, "stripe_payment_intent", payment);
    console.log(`  stdio ${round}: ${r.text}`);
    check(r.op.replayed && r.op.id === first.op.id, `oncebox mcp over stdio (start ${round}) is a replay of the same op`);
    ops.push(r.op);
    await s.close();
  }
} catch (err) {
  problems.push(`the run failed: ${err instanceof Error ? err.message : String(err)}`);
  console.error(err);
}

try {
  // Let every op the calls made settle, then count at the fake Stripe.
  for (const key of new Set(ops.map((o) => o.key))) {
    for (let i = 0; i < 6; i++) {
      const op = await getJSON(`${dev.base}/v1/ops/${encodeURIComponent(key)}?wait=10s`, dev.token);
      if (["succeeded", "failed", "needs_review"].includes(op.status)) break;
    }
  }
  const list = await getJSON(`${dev.stripe}/v1/payment_intents?limit=100`, "sk_test_oncebox_dev");
  const mine = (list.data as Array<{ id: string; description?: string; status: string }>).filter((pi) => pi.description === description);
  console.log(`fake Stripe holds ${mine.length} PaymentIntent(s) for this payment: ${mine.map((pi) => `${pi.id} (${pi.status})`).join(", ")}`);
  check(mine.length === 1, "exactly one PaymentIntent at the fake Stripe");
} catch (err) {
  problems.push(`counting PaymentIntents failed: ${err instanceof Error ? err.message : String(err)}`);
}

dev.proc.kill("SIGINT");
await new Promise((done) => {
  dev.proc.once("exit", done);
  setTimeout(done, 30_000);
});
clearTimeout(deadline);
if (problems.length > 0) {
  console.error(`mcp-clients: FAIL: ${problems.join("; ")}`);
  process.exit(1);
}
console.log("mcp-clients: ok: four calls from two HTTP sessions and a restarted stdio server, one PaymentIntent");
