"""A stateless server with one slow read-only tool: `nap` sleeps 3 s, past an audit run with `--timeout 1`.
Nothing here keeps state; the auditor must leave `nap` out of the checks after its first unanswered call
(and say so) rather than spend each check's whole budget waiting on it, and must still pass every check.
"""

from __future__ import annotations

import asyncio

from mcp_stateless import App

app = App("slow-tool", "1.0.0")


@app.tool(annotations={"readOnlyHint": True})
async def nap() -> str:
    """Sleep for three seconds, then say so."""
    await asyncio.sleep(3)
    return "rested"


@app.tool(annotations={"readOnlyHint": True})
def ping() -> str:
    """Answer at once."""
    return "pong"
