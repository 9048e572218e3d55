"""Drives the official Python client (`mcp==2.3.0`, its own venv) against tests/legacy/legacy_app.py in
`legacy` mode (the initialize handshake) or `auto` (discover first: must land modern), and prints what
it got back as one JSON object.

    python mcp_legacy_client.py <legacy|auto> http <url>
    python mcp_legacy_client.py <legacy|auto> stdio <command> [args...]
    python mcp_legacy_client.py <legacy|auto> sse <url>     (the 2024-11-05 HTTP+SSE transport)
"""

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if c.type == "text")


async def main(mode: str, kind: str, target: str, rest: list[str]) -> dict[str, Any]:
    server: Any = (target if kind == "http" else sse_client(target) if kind == "sse"
                   else StdioServerParameters(command=target, args=rest))
    out: dict[str, Any] = {"asked": [], "sampled": [], "logs": []}

    async def elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        out["asked"].append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Py"})

    async def sample(_ctx: Any, params: Any) -> types.CreateMessageResult:
        out["sampled"].append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="yes"),
                                         model="m")

    async def log(params: Any) -> None:
        out["logs"].append(params.data)

    with anyio.fail_after(60):
        async with Client(server, mode=mode, elicitation_callback=elicit, sampling_callback=sample,
                          logging_callback=log, cache=None) as client:
            out["version"] = client.protocol_version
            out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            out["greet"] = text(await client.call_tool("greet", {"name": "Ann"}))
            out["askName"] = text(await client.call_tool("ask_name", {}))
            out["askTwice"] = text(await client.call_tool("ask_twice", {}))
            if mode == "legacy":
                await client.set_logging_level("info")
                out["chatty"] = text(await client.call_tool("chatty", {}))
                await client.subscribe_resource("test://watched")
                await client.send_ping()
    return out


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])))
