// The CI proof of the recipes: a real `oncebox serve` pointed at oncebox's fake Stripe
// (oncebox-fakes), the official MCP TypeScript SDK, and one payment asked for four times: in two separate MCP sessions over HTTP (no _meta), then
// twice through `oncebox mcp` over stdio, restarted in between; then once more in a new
// session with its description reworded, as a re-prompted model words it (the same
// payment by its identity fields: it must not be executed), and once with
// "occurrence": 2 (a deliberate second payment). The fake Stripe must hold exactly one
// PaymentIntent for the payment and one for the deliberate second; the run fails
// (exit 1) otherwise.
//
//   DATABASE_URL=postgres://... ONCEBOX_BIN=../../bin/oncebox ONCEBOX_FAKES_BIN=../../bin/oncebox-fakes npm run ci
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { resolve } from "node:path";
import { callTool, connectHTTP, connectStdio, type OpView } from "./oncebox.js";

const bin = resolve(process.env.ONCEBOX_BIN ?? "../../bin/oncebox");
const databaseURL = process.env.DATABASE_URL ?? "";
if (!databaseURL) {
  console.error("mcp-clients: set DATABASE_URL to a Postgres that oncebox may migrate (`oncebox serve` and `oncebox mcp` share it)");
  process.exit(2);
}
const fakesBin = resolve(process.env.ONCEBOX_FAKES_BIN ?? "../../bin/oncebox-fakes");
const children: ChildProcess[] = [];
const deadline = setTimeout(() => {
  console.error("mcp-clients: FAIL: the run took longer than 4 minutes");
  for (const c of children) c.kill("SIGKILL");
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

// lineFrom starts a process and resolves with the first stdout line that re matches.
function lineFrom(proc: ChildProcess, re: RegExp, what: string): Promise<RegExpExecArray> {
  let out = "";
  return new Promise((done, fail) => {
    proc.once("exit", (code) => fail(new Error(`${what} exited (${code}) early:\n${out}`)));
    proc.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const m = re.exec(out);
      if (m) {
        proc.removeAllListeners("exit");
        done(m);
      }
    });
  });
}

// oncebox runs a short oncebox command and returns its standard output.
function oncebox(args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((done, fail) => {
    const proc = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    proc.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
    proc.once("exit", (code) => (code === 0 ? done(out) : fail(new Error(`oncebox ${args.join(" ")} exited with ${code}`))));
  });
}

// startServe starts the fake vendors and a real `oncebox serve` pointed at the fake
// Stripe, on a tenant of this run's own.
async function startServe(): Promise<{ base: string; token: string; stripe: string; tenant: string; env: Record<string, string> }> {
  const fakes = spawn(fakesBin, [], { stdio: ["ignore", "pipe", "inherit"] });
  children.push(fakes);
  const stripe = (await lineFrom(fakes, /stripe (http:\/\/[0-9.:]+)/, "oncebox-fakes"))[1];
  const env: Record<string, string> = {
    DATABASE_URL: databaseURL,
    STRIPE_API_KEY: "sk_test_oncebox_ci",
    STRIPE_API_BASE: stripe,
    SENDGRID_API_KEY: "",
    ONCEBOX_WEBHOOK_TARGETS: "",
    ONCEBOX_LOG_LEVEL: "warn",
  };
  if (process.env.ONCEBOX_MCP_DEDUPE_WINDOW) env.ONCEBOX_MCP_DEDUPE_WINDOW = process.env.ONCEBOX_MCP_DEDUPE_WINDOW;
  await oncebox(["migrate"], env);
  const tenant = `mcp-clients-${randomBytes(4).toString("hex")}`;
  const token = /obx_\S+/.exec(await oncebox(["tenant", "create", tenant], env))?.[0];
  if (!token) throw new Error("oncebox tenant create printed no token");
  const addr = `127.0.0.1:${await freePort()}`;
  const serve = spawn(bin, ["serve"], { env: { ...process.env, ...env, ONCEBOX_ADDR: addr }, stdio: ["ignore", "inherit", "inherit"] });
  children.push(serve);
  const base = `http://${addr}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (i > 600 || serve.exitCode !== null) throw new Error("oncebox serve did not answer /healthz");
    await new Promise((r) => setTimeout(r, 100));
  }
  return { base, token, stripe, tenant, env };
}

async function getJSON(url: string, token: string): Promise<any> {
  const res = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

const dev = await startServe();
console.log(`oncebox serve at ${dev.base} (tenant ${dev.tenant}), fake Stripe at ${dev.stripe}`);
const stdioEnv: Record<string, string> = { ...dev.env, ONCEBOX_LOG_LEVEL: "error", ONCEBOX_MCP_WAIT: "5s" };

// One run's payment: a description of its own, so that earlier runs on the same
// database do not count.
const description = `mcp-clients ${randomBytes(6).toString("hex")}`;
const payment = { amount: 4200, currency: "usd", payment_method: "pm_card_visa", confirm: true, description };
const reworded = `${description}, reworded: payment for the order of this run`;
const deliberate = `${description}, a second payment on purpose`;
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
    const s = await connectStdio(bin, dev.tenant, stdioEnv);
    const r = await callTool(s, "stripe_payment_intent", payment);
    console.log(`  stdio ${round}: ${r.text}`);
    check(r.op.replayed && r.op.id === first.op.id, `oncebox mcp over stdio (start ${round}) is a replay of the same op`);
    ops.push(r.op);
    await s.close();
  }

  // A new session, the description reworded: the same payment, not executed.
  const s3 = await connectHTTP(dev.base, dev.token);
  const rw = await callTool(s3, "stripe_payment_intent", { ...payment, description: reworded });
  console.log(`  reworded: ${rw.text}`);
  check(rw.op.replayed && rw.op.id === first.op.id, "the reworded payment is the same op");
  check(rw.text.includes("was already requested"), "the reworded payment's answer says it was already requested");
  check(rw.op.matched?.differed.includes("description") ?? false, "the answer names the description as what differed");
  ops.push(rw.op);

  // occurrence 2: a second payment on purpose.
  const again = await callTool(s3, "stripe_payment_intent", { ...payment, description: deliberate, occurrence: 2 });
  console.log(`  occurrence 2: ${again.text}`);
  check(!again.isError && !again.op.replayed && again.op.id !== first.op.id, "occurrence 2 records a second payment");
  ops.push(again.op);
  await s3.close();
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
  const list = await getJSON(`${dev.stripe}/v1/payment_intents?limit=100`, "sk_test_oncebox_ci");
  const pis = list.data as Array<{ id: string; description?: string; status: string }>;
  const mine = pis.filter((pi) => pi.description === description);
  console.log(`fake Stripe holds ${mine.length} PaymentIntent(s) for this payment: ${mine.map((pi) => `${pi.id} (${pi.status})`).join(", ")}`);
  check(mine.length === 1, "exactly one PaymentIntent at the fake Stripe");
  const rewordedPIs = pis.filter((pi) => pi.description === reworded);
  check(rewordedPIs.length === 0, `no second PaymentIntent for the reworded payment (found ${rewordedPIs.length})`);
  const deliberatePIs = pis.filter((pi) => pi.description === deliberate);
  check(deliberatePIs.length === 1, `one PaymentIntent for occurrence 2 (found ${deliberatePIs.length})`);
} catch (err) {
  problems.push(`counting PaymentIntents failed: ${err instanceof Error ? err.message : String(err)}`);
}

for (const c of children.reverse()) {
  c.kill("SIGTERM");
  await new Promise((done) => {
    if (c.exitCode !== null) return done(undefined);
    c.once("exit", done);
    setTimeout(done, 30_000);
  });
}
clearTimeout(deadline);
if (problems.length > 0) {
  console.error(`mcp-clients: FAIL: ${problems.join("; ")}`);
  process.exit(1);
}
console.log("mcp-clients: ok: four calls from two HTTP sessions and a restarted stdio server and a reworded one, one PaymentIntent; occurrence 2, a second");
process.exit(0);
