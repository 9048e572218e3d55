"""Drives the official Python client (`mcp==2.3.0`, in its own venv), pinned to 2026-07-28, against
`mcp-stateless bridge` fronting the reference everything server, and prints what it got back as one
JSON object; tests/bridge/test_bridge_official_clients.py checks every value.

    python mcp_client.py http <url>
    python mcp_client.py stdio <command> [args...]

Runs with the separate venv's interpreter, never ours: it imports only `mcp` and the standard library.
"""

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters


def texts(result: Any) -> list[str]:
    return [c.text for c in result.content if c.type == "text"]


async def main(kind: str, target: str, rest: list[str]) -> dict[str, Any]:
    server: Any = target if kind == "http" else StdioServerParameters(command=target, args=rest)
    asked: list[str] = []

    async def elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    out: dict[str, Any] = {}
    with anyio.fail_after(60):
        async with Client(server, mode="2026-07-28", elicitation_callback=elicit, cache=None) as client:
            out["version"] = client.protocol_version
            discover = await client.session.discover()
            out["supportedVersions"] = list(discover.supported_versions)
            out["server"] = client.server_info.name if client.server_info else None
            out["tools"] = [t.name for t in (await client.list_tools()).tools]
            out["sum"] = texts(await client.call_tool("get-sum", {"a": 2, "b": 40}))
            out["echo"] = texts(await client.call_tool("echo", {"message": "héllo wörld ✓"}))
            out["elicited"] = texts(await client.call_tool("trigger-elicitation-request", {}))
            out["asked"] = asked
    return out


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3:])))
