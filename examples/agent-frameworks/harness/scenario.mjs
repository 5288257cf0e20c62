// The scripted model and the scenario every recipe runs in CI: what real models do to a
// payment tool (call it, call it again after a slow answer, re-plan in a new run from a
// fresh connection and call it in other words), a refund that waits for a person, one
// past the budget; then what the fake Stripe holds, and what each framework handed the
// model to read.
import { randomBytes } from "node:crypto";
import { cutProxy } from "./cut.mjs";
import * as oncebox from "./oncebox.mjs";

/**
 * A Brain is the scripted model behind every framework's own model interface: each
 * time the framework asks the model for its next turn, the recipe hands it the tool
 * results the framework put in the prompt since the last turn, and gets back one tool
 * call or a final text.
 */
export class Brain {
  constructor(framework, description) {
    this.framework = framework;
    this.description = description;
    this.seen = []; // [{run, step, text}]
    this.pi = "";
    this.steps = [];
    this.run = "";
    this.i = 0;
    this.calls = 0;
  }

  begin(run, steps) {
    this.run = run;
    this.steps = steps;
    this.i = 0;
  }

  /** turn takes the tool results' text the model now reads and returns its next move. */
  turn(results) {
    for (const text of results) {
      this.seen.push({ run: this.run, step: this.steps[this.i - 1]?.name ?? "?", text });
      const pi = /vendor reference (pi_[A-Za-z0-9]+)/.exec(text);
      if (pi && !this.pi) this.pi = pi[1];
    }
    const step = this.steps[this.i++];
    if (!step) return { type: "text", text: "(the script has no more steps)" };
    if (step.text) return { type: "text", text: step.text };
    this.calls++;
    return { type: "tool", name: step.tool, args: step.args(this), id: `call_${this.framework}_${this.calls}` };
  }
}

/** The conversation the recipes name: the user's thread, the same across runs and connections. */
export function conversationFor(thread) {
  // The check of the check: with ONCEBOX_RECIPES_FRESH_IDENTITY=1 every connection names
  // a conversation of its own, as a framework that mints an id per session would, so a
  // re-plan's reworded call is a new op: the run must then fail.
  if (process.env.ONCEBOX_RECIPES_FRESH_IDENTITY === "1") return `${thread}-${randomBytes(3).toString("hex")}`;
  return thread;
}

const payment = (brain, extra = {}) => ({
  amount: 5000,
  currency: "usd",
  payment_method: "pm_card_visa",
  confirm: true,
  description: brain.description,
  ...extra,
});

// The three runs of the user's task, each a fresh agent run on a fresh MCP connection.
const runs = [
  {
    name: "pay",
    prompt: "Charge the customer $50.00 for order 1042.",
    steps: [
      { name: "pay", tool: "stripe_payment_intent", args: (b) => payment(b) },
      { name: "pay again after the slow answer", tool: "stripe_payment_intent", args: (b) => payment(b) },
      { name: "done", text: "I asked for the payment; it will be carried out once." },
    ],
  },
  {
    name: "re-plan",
    prompt: "The last run stopped. Make sure order 1042 is paid, then refund $30.00 of it, then $15.00 more.",
    steps: [
      { name: "pay, reworded", tool: "stripe_payment_intent",
        args: (b) => payment(b, { description: `${b.description} (order 1042, re-planned)` }) },
      { name: "refund above the approval rule", tool: "stripe_refund",
        args: (b) => ({ payment_intent: b.pi || "pi_unknown", amount: 3000, reason: "requested_by_customer" }) },
      { name: "refund past the budget", tool: "stripe_refund",
        args: (b) => ({ payment_intent: b.pi || "pi_unknown", amount: 1500 }) },
      { name: "done", text: "The payment stands; the refund waits for approval; the second was refused." },
    ],
  },
  {
    name: "after approval",
    prompt: "Refund the $30.00 of order 1042 now.",
    steps: [
      { name: "refund again, reworded", tool: "stripe_refund",
        args: (b) => ({ payment_intent: b.pi || "pi_unknown", amount: 3000, reason: "duplicate" }) },
      { name: "done", text: "The refund was already made." },
    ],
  },
  {
    name: "cut",
    cut: true,
    prompt: "Charge the customer $12.00 for order 1043.",
    steps: [
      { name: "pay, connection cut", tool: "stripe_payment_intent",
        args: (b) => payment(b, { amount: 1200, description: `${b.description} order 1043` }) },
      { name: "pay again after the error", tool: "stripe_payment_intent",
        args: (b) => payment(b, { amount: 1200, description: `${b.description} order 1043` }) },
      { name: "done", text: "The payment for order 1043 was asked for once." },
    ],
  },
];

// What the model must read after each step: the sentence says plainly what happened.
const expected = {
  pay: [/Not confirmed yet: this payment is recorded and will be carried out at most once/, "the slow answer says the payment is recorded, not yet confirmed, and made at most once"],
  "pay again after the slow answer": [/was already requested earlier and was not repeated now/, "the call after the slow answer says it was already requested and not repeated"],
  "pay, reworded": [/Not done again: the same payment .* was already requested .*description differed.*carried out/, "the reworded payment says it was already done (description differed), not executed"],
  "refund above the approval rule": [/Waiting for approval: this refund needs a person's approval and has not been carried out/, "the refund above the rule says it waits for a person"],
  "refund past the budget": [/Not done: .*refunds-daily.*Nothing was executed or recorded/, "the refund past the budget says it was refused, naming the budget"],
  "refund again, reworded": [/(already requested|Not done again).*(carried out|vendor reference re_)/, "the refund asked again after approval says it was already carried out"],
  "pay again after the error": [/This payment was already requested earlier and was not repeated now/, "the call after a cut connection says it was already requested and not repeated"],
};

/** opKeys are the keys of the ops the model was told of (in the text, or in the JSON Mastra hands it). */
function opKeys(brain) {
  return new Set(brain.seen.flatMap((s) => [...s.text.matchAll(/op key (\S+?), status|"key":"([^"]+)"/g)].map((m) => m[1] ?? m[2])));
}

/**
 * runFramework runs the three runs through one framework (runAgent is the recipe's agent
 * loop: a fresh MCP connection with the given headers, the framework's agent, the Brain
 * as its model) and returns the problems found, each a sentence.
 */
export async function runFramework(ob, framework, runAgent) {
  const t = await oncebox.tenant(ob, framework);
  const description = `${framework} order 1042 ${randomBytes(4).toString("hex")}`;
  const brain = new Brain(framework, description);
  const thread = `thread-${framework}-${randomBytes(4).toString("hex")}`;
  const problems = [];
  const check = (ok, what) => {
    console.log(`  ${ok ? "ok  " : "FAIL"} ${framework}: ${what}`);
    if (!ok) problems.push(`${framework}: ${what}`);
  };
  const connect = () => {
    const conversationId = conversationFor(thread);
    return {
      url: `${ob.base}/mcp`,
      conversationId,
      headers: { Authorization: `Bearer ${t.token}`, "Oncebox-Conversation-Id": conversationId },
    };
  };
  for (const run of runs) {
    brain.begin(run.name, run.steps);
    const conn = connect();
    // The "cut" run goes through a proxy that drops the first payment call's connection
    // after oncebox answered it.
    const proxy = run.cut ? await cutProxy(ob.base, (body) => body.includes('"tools/call"') && body.includes("order 1043")) : null;
    if (proxy) conn.url = `${proxy.url}/mcp`;
    try {
      await runAgent({ ...conn, prompt: run.prompt, brain });
    } catch (err) {
      check(false, `the run "${run.name}" threw: ${err?.stack ?? err}`);
    } finally {
      if (proxy) {
        check(proxy.cuts() === 1, `the proxy cut one payment call's connection after oncebox answered it (cut ${proxy.cuts()})`);
        await proxy.close();
      }
    }
    check(brain.i >= run.steps.length, `the run "${run.name}" went through its ${run.steps.length} model turns (went through ${brain.i})`);
    if (run.name === "pay") {
      // A later run: by then the slow vendor has answered and oncebox has recorded it.
      for (const key of opKeys(brain)) await oncebox.settle(ob, t, key);
    }
    if (run.name === "re-plan") {
      const before = await oncebox.stripeObjects(ob, description);
      check(before.refunds.length === 0, `no refund at the fake Stripe before a person approves (found ${before.refunds.length})`);
      const approved = await oncebox.approveRefunds(ob, t);
      check(approved === 1, `one refund waited for approval and was approved through oncebox approve (found ${approved})`);
    }
  }
  if (process.env.ONCEBOX_RECIPES_VERBOSE === "1") {
    for (const s of brain.seen) console.log(`  ${framework} [${s.run} / ${s.step}] the model read: ${s.text}`);
  }
  // Every op the model was told of is done with its vendor before the count.
  const keys = opKeys(brain);
  const conversations = new Set();
  for (const key of keys) conversations.add((await oncebox.settle(ob, t, key)).conversation_id ?? "");
  if (process.env.ONCEBOX_RECIPES_FRESH_IDENTITY !== "1") {
    check(conversations.size === 1 && conversations.has(thread),
      `every op names the user's thread as its conversation (found ${JSON.stringify([...conversations])})`);
  }
  const { pis, refunds } = await oncebox.stripeObjects(ob, description);
  const order = pis.filter((pi) => pi.amount === 5000);
  check(order.length === 1, `one PaymentIntent at the fake Stripe for the order (found ${order.length}${order.length > 1 ? ": a second side effect" : ""})`);
  const cutOrder = pis.filter((pi) => pi.amount === 1200);
  check(cutOrder.length === 1, `one PaymentIntent for the order whose call lost its connection (found ${cutOrder.length}${cutOrder.length > 1 ? ": a second side effect" : ""})`);
  const approvedRefunds = refunds.filter((r) => r.amount === 3000);
  check(approvedRefunds.length === 1, `one $30.00 refund, made after the approval (found ${approvedRefunds.length}${approvedRefunds.length > 1 ? ": a second side effect" : ""})`);
  check(refunds.length === approvedRefunds.length, `nothing past the budget: no other refund (found ${refunds.length - approvedRefunds.length})`);
  for (const [step, [re, what]] of Object.entries(expected)) {
    const seen = brain.seen.filter((s) => s.step === step);
    const ok = seen.length === 1 && re.test(seen[0].text);
    check(ok, what + (ok ? "" : `; the model read: ${JSON.stringify(seen.map((s) => s.text))}`));
  }
  if (framework === "mastra") {
    // @mastra/mcp reconnects and sends a call again after a transport error: the model reads
    // oncebox's answer to that retry, a replay of the op the cut call recorded.
    const first = brain.seen.find((x) => x.step === "pay, connection cut")?.text ?? "";
    check(/"replayed":true/.test(first) && /already requested earlier and was not repeated/.test(first),
      `Mastra's own retry of the cut call was answered as a replay (the model read: ${first.slice(0, 200)})`);
  }
  return problems;
}
