// A plain TypeScript MCP client of oncebox: list the tools, make one payment, print
// what the model would read.
//
//   ONCEBOX_URL=http://127.0.0.1:8080 ONCEBOX_TOKEN=obx_... npm run example
import { callTool, connectHTTP } from "./oncebox.js";

const baseURL = process.env.ONCEBOX_URL ?? "http://127.0.0.1:8080";
const token = process.env.ONCEBOX_TOKEN;
if (!token) {
  console.error("set ONCEBOX_TOKEN to an agent token (oncebox dev prints one)");
  process.exit(2);
}

const client = await connectHTTP(baseURL, token, process.env.ONCEBOX_CONVERSATION_ID);
const { tools } = await client.listTools();
console.log("tools:", tools.map((t) => t.name).join(", "));

const { text, op } = await callTool(client, "stripe_payment_intent", {
  amount: 2000,
  currency: "usd",
  payment_method: "pm_card_visa",
  confirm: true,
  description: "order 1001",
});
console.log(text);
console.log(`op ${op.id}: ${op.status}${op.replayed ? " (replayed)" : ""}`);
await client.close();
