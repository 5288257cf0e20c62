// The CI harness's oncebox: the fake vendors (oncebox-fakes, its Stripe slow on purpose),
// a real `oncebox serve` on a database of its own tenants, and what a person does: set a
// tenant's approval rule and budget, approve through the CLI, count at the fake Stripe.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { resolve } from "node:path";

const bin = resolve(process.env.ONCEBOX_BIN ?? "../../bin/oncebox");
const fakesBin = resolve(process.env.ONCEBOX_FAKES_BIN ?? "../../bin/oncebox-fakes");
export const children = [];

function freePort() {
  return new Promise((done, fail) => {
    const srv = createServer();
    srv.once("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => done(port));
    });
  });
}

function firstLine(proc, re, what) {
  let out = "";
  return new Promise((done, fail) => {
    proc.once("exit", (code) => fail(new Error(`${what} exited (${code}) early:\n${out}`)));
    proc.stdout.on("data", (chunk) => {
      out += chunk.toString();
      const m = re.exec(out);
      if (m) {
        proc.removeAllListeners("exit");
        done(m);
      }
    });
  });
}

// cli runs a short oncebox command and returns its standard output.
export function cli(args, env) {
  return new Promise((done, fail) => {
    const proc = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let errOut = "";
    proc.stdout.on("data", (c) => (out += c.toString()));
    proc.stderr.on("data", (c) => (errOut += c.toString()));
    proc.once("exit", (code) => (code === 0 ? done(out) : fail(new Error(`oncebox ${args.join(" ")} exited with ${code}: ${errOut}`))));
  });
}

/**
 * start brings up the fake vendors and `oncebox serve`. The fake Stripe holds each
 * PaymentIntent creation for 3 s and oncebox's MCP calls wait 1 s for the vendor, so a
 * payment's first answer is "not confirmed yet": the slow answer a model calls again after.
 */
export async function start(databaseURL) {
  const fakes = spawn(fakesBin, ["--stripe-delay", "3s"], { stdio: ["ignore", "pipe", "inherit"] });
  children.push(fakes);
  const stripe = (await firstLine(fakes, /stripe (http:\/\/[0-9.:]+)/, "oncebox-fakes"))[1];
  const env = {
    DATABASE_URL: databaseURL,
    STRIPE_API_KEY: "sk_test_oncebox_ci",
    STRIPE_API_BASE: stripe,
    SENDGRID_API_KEY: "",
    ONCEBOX_WEBHOOK_TARGETS: "",
    ONCEBOX_LOG_LEVEL: "warn",
  };
  await cli(["migrate"], env);
  const addr = `127.0.0.1:${await freePort()}`;
  const serve = spawn(bin, ["serve"], {
    env: { ...process.env, ...env, ONCEBOX_ADDR: addr, ONCEBOX_MCP_WAIT: "1s" },
    stdio: ["ignore", "inherit", "inherit"],
  });
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
  return { base, stripe, env };
}

/**
 * tenant creates a tenant of this run's own, with an agent token, an approver token
 * (a person), refunds above $20.00 waiting for approval and a refund budget of $10.00 a
 * day that refuses what would go past it.
 */
export async function tenant(ob, framework) {
  const name = `agents-${framework}-${randomBytes(4).toString("hex")}`;
  const token = /obx_\S+/.exec(await cli(["tenant", "create", name], ob.env))?.[0];
  const approver = /obx_\S+/.exec(
    await cli(["tenant", "token", "create", "--role", "approver", "--person", "pat@example.com", name], ob.env),
  )?.[0];
  if (!token || !approver) throw new Error("oncebox tenant create / token create printed no token");
  await cli(["tenant", "policy", "set", name, "stripe.refund", "--mode", "above", "--above", "usd=2000"], ob.env);
  await cli(["tenant", "budget", "set", "--tenant", name, "refunds-daily", "--window", "24h", "--tool", "stripe.refund",
    "--amount", "usd=1000", "--on-exceed", "refuse"], ob.env);
  return { name, token, approver };
}

export async function getJSON(url, token) {
  const res = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** settle waits (at most 60 s) until the tenant's op under key is done with its vendor. */
export async function settle(ob, t, key) {
  for (let i = 0; i < 6; i++) {
    const op = await getJSON(`${ob.base}/v1/ops/${encodeURIComponent(key)}?wait=10s`, t.token);
    if (["succeeded", "failed", "needs_review", "rejected", "awaiting_approval"].includes(op.status)) return op;
  }
  throw new Error(`op ${key} did not settle within a minute`);
}

/** approveRefunds is the person: the approvals waiting (GET /v1/approvals), approved with the CLI. */
export async function approveRefunds(ob, t) {
  const body = await getJSON(`${ob.base}/v1/approvals`, t.approver);
  const waiting = (body.data ?? body.approvals ?? body).filter((op) => op.tool === "stripe.refund");
  for (const op of waiting) {
    await cli(["approve", "--tenant", t.name, "--token", t.approver, "--reason", "checked with the customer", op.key], ob.env);
    await settle(ob, t, op.key);
  }
  return waiting.length;
}

/** stripeObjects counts what the fake Stripe holds for one run: its PaymentIntents and their refunds. */
export async function stripeObjects(ob, description) {
  const pis = (await getJSON(`${ob.stripe}/v1/payment_intents?limit=100`, "sk_test_oncebox_ci")).data.filter((pi) =>
    String(pi.description ?? "").startsWith(description),
  );
  const refunds = [];
  for (const pi of pis) {
    const list = await getJSON(`${ob.stripe}/v1/refunds?payment_intent=${pi.id}&limit=100`, "sk_test_oncebox_ci");
    refunds.push(...list.data.filter((r) => r.payment_intent === pi.id));
  }
  return { pis, refunds };
}

export async function stop() {
  for (const c of children.reverse()) {
    c.kill("SIGTERM");
    await new Promise((done) => {
      if (c.exitCode !== null) return done();
      c.once("exit", done);
      setTimeout(done, 30_000);
    });
  }
}
