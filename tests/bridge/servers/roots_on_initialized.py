"""A 2025-era server (official Python SDK `mcp` 1.30.0, stdio) that asks its client `roots/list` the moment
`notifications/initialized` arrives, unprompted by any request, and can ask again later on its own. What
each ask got back is kept and told by a tool, so a test through the bridge sees what the upstream saw.

    <mcp 1.30.0 venv python> roots_on_initialized.py

Tools: `outcome {which}` waits (up to 10 s) for the outcome of the ask named `initialized` or `later` and
returns it as text: `answered: URI,URI` or `refused: CODE MESSAGE`; `ask_later {delay}` returns at once and
asks `roots/list` `delay` seconds afterwards (the `later` outcome).
"""

from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import McpError

server: Server[Any, Any] = Server("roots-on-initialized", version="1.0.0")
outcomes: dict[str, str] = {}
settled: dict[str, anyio.Event] = {"initialized": anyio.Event(), "later": anyio.Event()}
sessions: list[ServerSession] = []


async def ask_roots(which: str) -> None:
    try:
        listed = await sessions[0].list_roots()
        outcomes[which] = "answered: " + ",".join(str(r.uri) for r in listed.roots)
    except McpError as e:
        outcomes[which] = f"refused: {e.error.code} {e.error.message}"
    settled[which].set()


class RootsServer(Server[Any, Any]):
    async def _handle_message(self, message: Any, session: ServerSession, lifespan_context: Any,
                              raise_exceptions: bool = False) -> None:
        if not sessions:
            sessions.append(session)  # notification handlers get no session of their own
        await super()._handle_message(message, session, lifespan_context, raise_exceptions)


server = RootsServer("roots-on-initialized", version="1.0.0")


async def on_initialized(_notification: types.InitializedNotification) -> None:
    await ask_roots("initialized")


server.notification_handlers[types.InitializedNotification] = on_initialized


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(name="outcome", description="What the named roots/list ask got back.",
                   inputSchema={"type": "object", "properties": {"which": {"type": "string",
                                                                            "enum": ["initialized", "later"]}},
                                "required": ["which"]}),
        types.Tool(name="ask_later", description="Ask roots/list after a delay, on no request's behalf.",
                   inputSchema={"type": "object", "properties": {"delay": {"type": "number"}},
                                "required": ["delay"]}),
    ]


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
    if name == "outcome":
        which = arguments["which"]
        with anyio.fail_after(10):
            await settled[which].wait()
        return [types.TextContent(type="text", text=outcomes[which])]
    delay = float(arguments["delay"])

    async def later() -> None:
        await anyio.sleep(delay)
        await ask_roots("later")

    background.start_soon(later)
    return [types.TextContent(type="text", text="asking later")]


async def main() -> None:
    global background
    async with stdio_server() as (read, write), anyio.create_task_group() as background:
        await server.run(read, write, server.create_initialization_options())
        background.cancel_scope.cancel()


background: anyio.abc.TaskGroup

if __name__ == "__main__":
    anyio.run(main)
