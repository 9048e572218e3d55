"""Tools that produce a lot of output, for the flow-control tests (stdio and HTTP): big results, progress
and log floods, a blocking sync tool, and a call that needs the state store.

Serve it with `mcp-stateless serve tests/transports/apps/flood_app.py:app --stdio` (or `--http`).
"""

from __future__ import annotations

import asyncio
import time

from mcp_stateless import App, Context, Handle

app = App("flood", "0.1.0")


@app.tool()
async def big(size: int) -> str:
    """A result of `size` bytes."""
    await asyncio.sleep(0)
    return "x" * size


@app.tool()
async def progress_flood(ctx: Context, seconds: float, size: int = 1000) -> str:
    """Report progress as fast as possible for `seconds` (each message carries `size` bytes)."""
    end = time.monotonic() + seconds
    pad = "p" * size
    i = 0
    while time.monotonic() < end:
        i += 1
        ctx.report_progress(i, None, pad)
        if i % 100 == 0:
            await asyncio.sleep(0)
    return f"reported {i}"


@app.tool()
async def log_flood(ctx: Context, seconds: float, size: int = 1000) -> str:
    """Log as fast as possible for `seconds` (each message carries `size` bytes)."""
    end = time.monotonic() + seconds
    pad = "l" * size
    i = 0
    while time.monotonic() < end:
        i += 1
        ctx.log("info", f"{i} {pad}")
        if i % 100 == 0:
            await asyncio.sleep(0)
    return f"logged {i}"


@app.tool()
def block(seconds: float) -> str:
    """Hold a worker thread."""
    time.sleep(seconds)
    return f"blocked {seconds}"


class Note(Handle, prefix="note", ttl=600, noun="note", issued_by="begin_note"):
    """A record in the state store (so a call needs store I/O)."""


@app.tool()
async def begin_note(ctx: Context) -> str:
    """Mint a handle: one write to the state store."""
    note = await Note.mint(ctx, {"text": ""})
    return note.id
