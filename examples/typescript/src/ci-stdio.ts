// The CI proof that `oncebox mcp --tools-file` over stdio is a full door, with the
// official MCP TypeScript SDK's StdioClientTransport and no built-in vendor key: it
// lists the catalog's HTTP tool and a stdio upstream's tools as /mcp does, calls the
// catalog tool and the upstream's write and read tools once, and closes; then no
// process it started is left. A second start is killed with SIGKILL: its upstream
// child must die with it. Exit 1 on any failure.
//
//   DATABASE_URL=postgres://... ONCEBOX_BIN=../../bin/oncebox ONCEBOX_FAKES_BIN=../../bin/oncebox-fakes \
//     ONCEBOX_FAKEMCP_BIN=../../bin/fakemcp node dist/ci-stdio.js
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { callTool } from "./oncebox.js";

const bin = resolve(process.env.ONCEBOX_BIN ?? "../../bin/oncebox");
const fakesBin = resolve(process.env.ONCEBOX_FAKES_BIN ?? "../../bin/oncebox-fakes");
const fakemcpBin = resolve(process.env.ONCEBOX_FAKEMCP_BIN ?? "../../bin/fakemcp");
const databaseURL = process.env.DATABASE_URL ?? "";
if (!databaseURL) {
  console.error("mcp-stdio: set DATABASE_URL to a Postgres that oncebox may migrate");
  process.exit(2);
}
const children: ChildProcess[] = [];
const deadline = setTimeout(() => {
  console.error("mcp-stdio: FAIL: the run took longer than 3 minutes");
  for (const c of children) c.kill("SIGKILL");
  process.exit(1);
}, 180_000);

const problems: string[] = [];
function check(ok: boolean, what: string) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) problems.push(what);
}

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

function oncebox(args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((done, fail) => {
    const proc = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    proc.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
    proc.once("exit", (code) => (code === 0 ? done(out) : fail(new Error(`oncebox ${args.join(" ")} exited with ${code}`))));
  });
}

/** upstreams returns the live (not zombie) processes whose command line names marker, with their parent. */
function upstreams(marker: string): Array<{ pid: number; ppid: number }> {
  const out: Array<{ pid: number; ppid: number }> = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8");
      if (!cmdline.includes(marker)) continue;
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] === "Z") continue;
      out.push({ pid: Number(name), ppid: Number(fields[1]) });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(ok: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    if (ok()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return ok();
}

const fakes = spawn(fakesBin, [], { stdio: ["ignore", "pipe", "inherit"] });
children.push(fakes);
try {
  const webhook = (await lineFrom(fakes, /webhook (http:\/\/[0-9.:]+)/, "oncebox-fakes"))[1];
  // No built-in vendor: the catalog is the only source of tools.
  const env: Record<string, string> = {
    DATABASE_URL: databaseURL,
    STRIPE_API_KEY: "",
    SENDGRID_API_KEY: "",
    ONCEBOX_WEBHOOK_TARGETS: "",
    ONCEBOX_LOG_LEVEL: "error",
    ONCEBOX_MCP_WAIT: "1s",
  };
  await oncebox(["migrate"], env);
  const tenant = `mcp-stdio-${randomBytes(4).toString("hex")}`;
  await oncebox(["tenant", "create", tenant], env);
  const dir = mkdtempSync(join(tmpdir(), "oncebox-mcp-stdio-"));
  const state = join(dir, "box-state.json"); // names this run's upstream processes
  const tools = join(dir, "tools.yaml");
  writeFileSync(
    tools,
    `targets:
  helpdesk:
    base_url: ${webhook}
tools:
  helpdesk.create_ticket:
    description: Open a support ticket.
    class: write
    target: helpdesk
    path: /tickets
    input_schema: {type: object, properties: {subject: {type: string}}, required: [subject]}
upstreams:
  box:
    command: ${fakemcpBin}
    args: [-state, ${state}]
`,
  );
  const start = async (): Promise<{ client: Client; transport: StdioClientTransport }> => {
    const transport = new StdioClientTransport({
      command: bin,
      args: ["mcp", "--tenant", tenant, "--tools-file", tools],
      env,
      stderr: "inherit",
    });
    const client = new Client({ name: "oncebox-ci-stdio", version: "1.0.0" });
    await client.connect(transport);
    return { client, transport };
  };

  // 1. list, call, close.
  const { client, transport } = await start();
  const pid = transport.pid!;
  const listed = (await client.listTools()).tools;
  const byName = new Map(listed.map((t) => [t.name, t]));
  console.log(`tools: ${[...byName.keys()].join(", ")}`);
  check(byName.has("helpdesk_create_ticket"), "the catalog's HTTP tool is offered");
  check(byName.has("box_send_mail") && byName.has("box_find_mail"), "the stdio upstream's tools are offered");
  check(![...byName.keys()].some((n) => n.startsWith("stripe_")), "no built-in tool without its vendor key");
  check(byName.get("box_find_mail")?.annotations?.readOnlyHint === true, "the upstream's read tool is annotated read-only");
  check(byName.get("helpdesk_create_ticket")?.annotations?.idempotentHint === true, "the catalog's write tool is annotated idempotent");
  const kids = upstreams(state);
  check(kids.length === 1 && kids[0].ppid === pid, `one upstream process, a child of oncebox mcp (${JSON.stringify(kids)})`);

  const ticket = await callTool(client, "helpdesk_create_ticket", { subject: `ci ${randomBytes(3).toString("hex")}` });
  console.log(`  helpdesk_create_ticket: ${ticket.text}`);
  check(!ticket.isError && typeof ticket.op?.id === "string", "the catalog tool records an op");
  const mail = await callTool(client, "box_send_mail", { to: "ann@example.com", subject: "Hi" });
  console.log(`  box_send_mail: ${mail.text}`);
  check(!mail.isError && typeof mail.op?.id === "string", "the upstream's write tool records an op");
  const found = await client.callTool({ name: "box_find_mail", arguments: { ref: "none" } });
  check(!found.isError, `the upstream's read tool answers at once (${JSON.stringify(found.structuredContent)})`);
  await client.close();
  check(await until(() => !alive(pid) && upstreams(state).length === 0, 15_000),
    `after close, neither oncebox mcp nor its upstream is left (${JSON.stringify(upstreams(state))})`);

  // 2. oncebox killed outright: the kernel ends its upstream child.
  const second = await start();
  await second.client.listTools();
  const kpid = second.transport.pid!;
  check(upstreams(state).length === 1, "started again: one upstream process");
  process.kill(kpid, "SIGKILL");
  check(await until(() => upstreams(state).length === 0, 15_000),
    `oncebox mcp killed with SIGKILL: its upstream child dies with it (${JSON.stringify(upstreams(state))})`);
  await second.client.close().catch(() => undefined);
} catch (err) {
  problems.push(`the run failed: ${err instanceof Error ? err.message : String(err)}`);
  console.error(err);
}

for (const c of children) c.kill("SIGTERM");
clearTimeout(deadline);
if (problems.length > 0) {
  console.error(`mcp-stdio: FAIL: ${problems.join("; ")}`);
  process.exit(1);
}
console.log("mcp-stdio: ok: oncebox mcp --tools-file offered and called the catalog and upstream tools over stdio, and left no process");
process.exit(0);
