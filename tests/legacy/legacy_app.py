"""The app the legacy tests serve: one handler per 2025 feature, each written once for both eras."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_stateless import App, Context

app = App("legacy-tests", "1.0.0", instructions="Serves 2025 and 2026 clients alike.")

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@app.tool()
def greet(name: str) -> str:
    """Greets"""
    return f"Hello, {name}!"


@app.tool()
def ask_name(ctx: Context) -> str:
    """Asks the user's name (a server->client elicitation on the legacy path, MRTR on the modern one)"""
    answer = ctx.elicit("What is your name?", NAME_FORM, key="name")
    return f"Hello, {(answer.content or {}).get('name', '?')} ({answer.action})"


@app.tool()
def ask_twice(ctx: Context) -> str:
    """Two rounds: the first answer is carried in the sealed state while the second is asked"""
    first = ctx.elicit("First?", NAME_FORM, key="first")
    second = ctx.sample("Say something", 20, key="second")
    content = second.get("content")
    said = content.get("text", "") if isinstance(content, dict) else ""
    return f"{(first.content or {}).get('name')} then {said}"


@app.tool()
def roots_count(ctx: Context) -> str:
    """Asks the client for its roots"""
    return f"{len(ctx.list_roots())} roots"


@app.tool()
async def chatty(ctx: Context) -> str:
    """Logs at debug, info and error, and reports progress"""
    ctx.log("debug", "debug line")
    ctx.log("info", "info line")
    ctx.log("error", "error line")
    ctx.report_progress(1, 2)
    await asyncio.sleep(0.02)
    ctx.report_progress(2, 2)
    return "done"


@app.tool()
async def change_tools() -> str:
    """Tells every listener (GET streams too) that the tool list changed"""
    await app.notify_tools_changed()
    return "changed"


@app.tool()
async def touch(uri: str) -> str:
    """Marks a resource updated (its subscribers hear of it)"""
    await app.notify_resource_updated(uri)
    return f"touched {uri}"


@app.resource("test://watched", name="watched", mime_type="text/plain")
def watched() -> str:
    return "watched content"


@app.prompt()
def hello_prompt(who: str) -> str:
    """Says hello"""
    return f"Hello {who}"


@app.completion(prompt="hello_prompt")
def complete_who(argument: str, value: str, context: dict[str, Any]) -> list[str]:
    return [w for w in ("alice", "alan", "bob") if w.startswith(value)]


@app.tool()
async def poll_me(ctx: Context) -> str:
    """Closes its client's SSE connection mid-call (SEP-1699 polling), then finishes"""
    from mcp_stateless.server.legacy import close_stream

    closed = close_stream(ctx)
    await asyncio.sleep(0.2)
    return f"finished (stream closed: {closed})"


@app.tool()
async def slow(ctx: Context) -> str:
    """Reports progress, then takes 10 s (long enough to be cancelled)"""
    ctx.report_progress(1, 2)
    await asyncio.sleep(10)
    return "slow done"


@app.tool()
def era(ctx: Context) -> str:
    """The protocol version this call was made under (which era the client landed in)"""
    return ctx.protocol_version
