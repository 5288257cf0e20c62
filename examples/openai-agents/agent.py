"""An OpenAI Agents SDK agent whose payments go through oncebox, with the conversation
named in each tool call's _meta through the SDK's tool_meta_resolver hook.

    pip install -r requirements.txt
    ONCEBOX_TOKEN=obx_... OPENAI_API_KEY=sk-... python agent.py

Every run of the same conversation (the same conversation_id in the run context) maps a
repeated payment to the op of the first: a retried run, a crashed worker that runs the
conversation again, or a framework retry charges once, even when the model words the
payment's description differently the second time (oncebox compares the payment's
identity fields: amount, currency, customer, payment method). Another conversation is
another op. Without a resolver the call names no conversation, and oncebox's dedupe
window (24 h for payments by default) applies across all sessions instead.
"""

import asyncio
import os

from agents import Agent, Runner
from agents.mcp import MCPServerStreamableHttp, MCPToolMetaContext

ONCEBOX_URL = os.environ.get("ONCEBOX_URL", "http://127.0.0.1:8080")

# oncebox waits up to ONCEBOX_MCP_WAIT (10 s by default) for the vendor before it answers
# "not confirmed yet"; the SDK's session timeout (5 s by default) must be longer, or a
# slow vendor turns into timeouts and retries instead of that answer.
ONCEBOX_MCP_WAIT_SECONDS = 10
SESSION_TIMEOUT_SECONDS = ONCEBOX_MCP_WAIT_SECONDS + 20


def oncebox_meta(context: MCPToolMetaContext) -> dict[str, str] | None:
    """Names the conversation of every oncebox tool call (the _meta oncebox reads)."""
    data = context.run_context.context or {}
    conversation = data.get("conversation_id")
    if not conversation:
        return None
    return {"oncebox/conversation_id": str(conversation)}


async def main() -> None:
    async with MCPServerStreamableHttp(
        name="oncebox",
        params={
            "url": ONCEBOX_URL + "/mcp",
            "headers": {"Authorization": "Bearer " + os.environ["ONCEBOX_TOKEN"]},
            # The HTTP request of one tool call lasts as long as oncebox's wait.
            "timeout": SESSION_TIMEOUT_SECONDS,
        },
        client_session_timeout_seconds=SESSION_TIMEOUT_SECONDS,
        tool_meta_resolver=oncebox_meta,
        # Retries are safe: a retried call is the same op.
        max_retry_attempts=3,
    ) as oncebox:
        agent = Agent(
            name="Billing assistant",
            instructions=(
                "You take payments with the oncebox tools. Read each tool result: it says whether the "
                "payment was made now, was already requested earlier, is pending or was refused. "
                "Never call a tool again to retry; raise occurrence only when the user asks for "
                "the same payment once more."
            ),
            mcp_servers=[oncebox],
        )
        result = await Runner.run(
            agent,
            "Charge 20.00 USD with payment method pm_card_visa for order 1001, confirmed.",
            context={"conversation_id": "order-1001-chat"},
        )
        print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
