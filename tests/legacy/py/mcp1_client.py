"""Drives the official Python SDK's 1.x `ClientSession` (`mcp==1.30.0`, its own venv: a 2025-era client
that only speaks the initialize handshake) against tests/legacy/legacy_app.py, and prints what it got
back as one JSON object.

    python mcp1_client.py http <url>
    python mcp1_client.py stdio <command> [args...]
"""

import contextlib
import json
import sys
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if c.type == "text")


async def main(kind: str, target: str, rest: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"asked": [], "sampled": [], "logs": [], "progress": [], "updated": [], "toolsChanged": 0}
    arrived = anyio.Event()

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        out["asked"].append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Py1"})

    async def sample(_ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        content = params.messages[0].content
        out["sampled"].append(content.text if isinstance(content, types.TextContent) else "?")
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="one"),
                                         model="m")

    async def roots(_ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///x")])  # type: ignore[arg-type]

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        out["logs"].append(params.data)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            note = message.root
            if isinstance(note, types.ResourceUpdatedNotification):
                out["updated"].append(str(note.params.uri))
            elif isinstance(note, types.ToolListChangedNotification):
                out["toolsChanged"] += 1
            if out["updated"] and out["toolsChanged"]:
                arrived.set()

    async def progress(done: float, total: float | None, _message: str | None) -> None:
        out["progress"].append(done)

    async with contextlib.AsyncExitStack() as stack:
        if kind == "http":
            read, write, session_id = await stack.enter_async_context(streamable_http_client(target))
        else:
            read, write = await stack.enter_async_context(
                stdio_client(StdioServerParameters(command=target, args=rest)))
            session_id = None
        session = await stack.enter_async_context(ClientSession(
            read, write, sampling_callback=sample, elicitation_callback=elicit, list_roots_callback=roots,
            logging_callback=log, message_handler=on_message,
            client_info=types.Implementation(name="interop-mcp1", version="1.0.0")))
        with anyio.fail_after(60):
            init = await session.initialize()
            out["version"] = init.protocolVersion
            out["server"] = init.serverInfo.name
            out["sessionId"] = session_id() if session_id else None
            out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
            out["greet"] = text(await session.call_tool("greet", {"name": "Ann"}))
            out["askName"] = text(await session.call_tool("ask_name", {}))
            out["askTwice"] = text(await session.call_tool("ask_twice", {}))
            out["roots"] = text(await session.call_tool("roots_count", {}))
            await session.call_tool("chatty", {})  # before any setLevel: every level, as official servers send
            out["logsBeforeSetLevel"], out["logs"] = out["logs"], []
            await session.set_logging_level("info")
            out["chatty"] = text(await session.call_tool("chatty", {}, progress_callback=progress))
            out["read"] = (await session.read_resource("test://watched")).contents[0].text  # type: ignore[union-attr]
            await session.subscribe_resource("test://watched")  # type: ignore[arg-type]
            await anyio.sleep(0.3)  # HTTP: the standalone GET stream opens in the background
            await session.call_tool("touch", {"uri": "test://watched"})
            await session.call_tool("change_tools", {})
            with anyio.move_on_after(10):
                await arrived.wait()
            await session.unsubscribe_resource("test://watched")  # type: ignore[arg-type]
            out["ping"] = (await session.send_ping()).model_dump()
    return out


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3:])))
