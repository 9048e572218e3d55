"""Tools the stdio and CLI tests need: slow and fast calls, stray output, progress/logs, MRTR, list changes.

Serve it with `mcp-stateless serve tests/apps/stdio_app.py:app --stdio`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from mcp_stateless import App, Context

print("stray output while the app module is imported")  # must not reach the protocol stream

app = App("stdio-test", "0.1.0")
app.declare("tools")


@app.tool()
async def slow(seconds: float) -> str:
    """Sleep (on the event loop), then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@app.tool()
def slow_sync(seconds: float) -> str:
    """Sleep in a worker thread, then answer."""
    time.sleep(seconds)
    return f"slept {seconds}"


@app.tool()
def fast(n: int) -> int:
    """Answer at once."""
    return n


@app.tool()
def noisy(text: str) -> str:
    """Write to stdout three ways (print, sys.stdout, the raw file descriptor) before answering."""
    print("print() from a tool")
    sys.stdout.write("sys.stdout.write from a tool\n")
    sys.stdout.flush()
    os.write(1, b"os.write(1) from a tool\n")
    return text


@app.tool()
async def chatty(ctx: Context, steps: int = 3) -> str:
    """Progress and log notifications, then the result."""
    for i in range(1, steps + 1):
        ctx.report_progress(i, steps, f"step {i}")
        ctx.log("info", f"did step {i}")
        await asyncio.sleep(0.01)
    return "chatty done"


@app.tool()
async def cancellable(ctx: Context) -> str:
    """Reports progress every 20 ms for ~10 s: a cancelled request must stop producing it."""
    for i in range(1, 500):
        ctx.report_progress(i)
        await asyncio.sleep(0.02)
    return "not cancelled"


@app.tool()
def greet(ctx: Context) -> str:
    """Ask the user's name (MRTR)."""
    answer = ctx.elicit("What is your name?", {"type": "object", "properties": {"name": {"type": "string"}},
                                               "required": ["name"]}, key="name")
    return f"Hello, {(answer.content or {})['name']}!"


@app.tool()
def whoami(ctx: Context) -> str:
    """The protocol version and declared capabilities this very request carried."""
    caps = ",".join(sorted(ctx.client_capabilities)) or "none"
    return f"{ctx.protocol_version} caps={caps}"


def _extra() -> str:
    """Comes and goes."""
    return "extra"


@app.tool()
async def toggle() -> str:
    """Add or remove the `extra` tool (notifies listen streams)."""
    from mcp_stateless.server.registry import Tool

    if not app.remove_tool("extra"):
        app.add_tool(Tool.build(_extra, name="extra"))
    await asyncio.sleep(0)
    return "toggled"
