"""The official Python SDK's 1.x client (`mcp==1.30.0`, its own venv; a 2025-era client: initialize,
then a session) against one URL: initialize, tools/list, tools/call `add`; prints one JSON object.

    python mcp1_basic.py <url>
"""

import json
import sys
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url: str) -> dict[str, Any]:
    async with streamable_http_client(url) as (read, write, session_id), ClientSession(read, write) as session:
        init = await session.initialize()
        tools = await session.list_tools()
        called = await session.call_tool("add", {"a": 2, "b": 40})
        return {
            "version": init.protocolVersion,
            "server": init.serverInfo.name,
            "sessionId": session_id(),
            "tools": sorted(t.name for t in tools.tools),
            "text": "".join(c.text for c in called.content if c.type == "text"),
            "isError": called.isError,
        }


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1])))
