"""A LangChain agent whose payments go through oncebox, with the MCP adapters
(langchain-mcp-adapters). They open a new MCP session for each tool call and send no
_meta, so the conversation is named in a header, per call, by a tool interceptor (or, for
a client that can set no header, in the URL).

    pip install -r requirements.txt
    ONCEBOX_TOKEN=obx_... OPENAI_API_KEY=sk-... python agent.py

An app with many conversations builds one client and one agent, and passes each
conversation's id as the run's context: the interceptor names it on every oncebox call,
so a payment retried in that conversation (even reworded) is one op, and the same payment
in another conversation is another. Without a conversation, calls of the same payment
within oncebox's dedupe window (24 h for payments by default) are one op anyway,
whichever session sends them.
"""

import asyncio
import os
from dataclasses import dataclass
from urllib.parse import quote

from langchain.agents import create_agent
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.interceptors import MCPToolCallRequest

ONCEBOX_URL = os.environ.get("ONCEBOX_URL", "http://127.0.0.1:8080")

# The header (or the URL's query parameter) oncebox reads the conversation from.
CONVERSATION_HEADER = "Oncebox-Conversation-Id"


@dataclass
class Conversation:
    """The run's context: which conversation the agent is in."""

    conversation_id: str


async def name_the_conversation(request: MCPToolCallRequest, handler):
    """A tool interceptor: names the run's conversation in a header of each oncebox call."""
    context = getattr(request.runtime, "context", None)
    conversation = getattr(context, "conversation_id", None)
    if request.server_name == "oncebox" and conversation:
        headers = {**(request.headers or {}), CONVERSATION_HEADER: str(conversation)}
        request = request.override(headers=headers)
    return await handler(request)


def oncebox_client() -> MultiServerMCPClient:
    return MultiServerMCPClient(
        {
            "oncebox": {
                "transport": "streamable_http",
                "url": ONCEBOX_URL + "/mcp",
                "headers": {"Authorization": "Bearer " + os.environ["ONCEBOX_TOKEN"]},
            }
        },
        tool_interceptors=[name_the_conversation],
    )


def oncebox_url_for(conversation_id: str) -> str:
    """The URL form, for a client that can set no header: the id URL-encoded."""
    return f"{ONCEBOX_URL}/mcp?conversation_id={quote(conversation_id, safe='')}"


async def main() -> None:
    client = oncebox_client()
    tools = await client.get_tools()
    agent = create_agent(
        "openai:gpt-4.1",
        tools,
        system_prompt=(
            "You take payments with the oncebox tools. Read each tool result: it says whether the "
            "payment was made now, was already requested earlier, is pending or was refused. "
            "Never call a tool again to retry; raise occurrence only when the user asks for the "
            "same payment once more."
        ),
        context_schema=Conversation,
    )
    result = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "Charge 20.00 USD with pm_card_visa for order 1001, confirmed."}]},
        context=Conversation(conversation_id="order 1001 / chat"),
    )
    print(result["messages"][-1].content)


if __name__ == "__main__":
    asyncio.run(main())
