"""A LangChain / LangGraph agent whose payments go through oncebox, with the MCP
adapters (langchain-mcp-adapters). They open a new MCP session for each tool call and
send no _meta, so the conversation is named in a header (or in the URL).

    pip install langchain-mcp-adapters langgraph "langchain[openai]"
    ONCEBOX_TOKEN=obx_... OPENAI_API_KEY=sk-... python agent.py

Without the header, identical calls within oncebox's dedupe window (24 h for payments by
default) are one op anyway, whichever session sends them; the header scopes
deduplication to one conversation instead.
"""

import asyncio
import os

from langchain_mcp_adapters.client import MultiServerMCPClient
from langgraph.prebuilt import create_react_agent

ONCEBOX_URL = os.environ.get("ONCEBOX_URL", "http://127.0.0.1:8080")


def oncebox_client(conversation_id: str) -> MultiServerMCPClient:
    return MultiServerMCPClient(
        {
            "oncebox": {
                "transport": "streamable_http",
                "url": ONCEBOX_URL + "/mcp",
                # Header form. A client that cannot set headers can use the URL form:
                #   "url": f"{ONCEBOX_URL}/mcp?conversation_id={conversation_id}"
                "headers": {
                    "Authorization": "Bearer " + os.environ["ONCEBOX_TOKEN"],
                    "Oncebox-Conversation-Id": conversation_id,
                },
            }
        }
    )


async def main() -> None:
    client = oncebox_client("order-1001-chat")
    tools = await client.get_tools()
    agent = create_react_agent("openai:gpt-4.1", tools)
    result = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "Charge 20.00 USD with pm_card_visa for order 1001, confirmed."}]}
    )
    print(result["messages"][-1].content)


if __name__ == "__main__":
    asyncio.run(main())
