"""Drives the official Python client (`mcp==2.3.0`, in its own venv) against one of our servers, pinned
to 2026-07-28, and prints what it got back as one JSON object; the pytest side checks every value.

    python mcp_client.py <echo|conformance> http <url>
    python mcp_client.py <echo|conformance> stdio <command> [args...]

Runs with the separate venv's interpreter, never ours: it imports only `mcp` and the standard library.
"""

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if c.type == "text")


async def main(app: str, kind: str, target: str, rest: list[str]) -> dict[str, Any]:
    server: Any = target if kind == "http" else StdioServerParameters(command=target, args=rest)
    asked: list[str] = []

    async def elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Alice"})

    out: dict[str, Any] = {}
    with anyio.fail_after(60):
        await run(app, server, asked, elicit, out)
    return out


async def run(app: str, server: Any, asked: list[str], elicit: Any, out: dict[str, Any]) -> None:
    async with Client(server, mode="2026-07-28", elicitation_callback=elicit, cache=None) as client:
        out["version"] = client.protocol_version
        discover = await client.session.discover()
        out["supportedVersions"] = list(discover.supported_versions)
        out["server"] = client.server_info.name if client.server_info else None
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        if app == "echo":
            out["echo"] = text(await client.call_tool("echo", {"text": "héllo wörld ✓"}))
            out["add"] = text(await client.call_tool("add", {"a": 2, "b": 3}))
        else:
            out["simple"] = text(await client.call_tool("test_simple_text", {}))
            # The content tools: the client accepts each result (it refuses one whose tool advertises an
            # outputSchema without structuredContent) and sees these content types.
            out["contents"] = {}
            for name in ("test_image_content", "test_audio_content", "test_embedded_resource",
                         "test_multiple_content_types"):
                r = await client.call_tool(name, {})
                out["contents"][name] = {"types": [c.type for c in r.content], "isError": bool(r.is_error)}
            out["greeting"] = text(await client.call_tool("test_input_required_result_elicitation", {}))
            out["asked"] = asked
            async with client.listen(tools_list_changed=True) as sub:
                out["honored"] = sub.honored.model_dump(by_alias=True, exclude_none=True)
                out["trigger"] = text(await client.call_tool("test_trigger_tool_change", {}))
                with anyio.fail_after(10):
                    async for event in sub:
                        out["event"] = type(event).__name__
                        break


if __name__ == "__main__":
    result = anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
    print(json.dumps(result))
