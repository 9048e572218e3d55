"""The app the authorization tests serve for what outlives one request: an MRTR round, a task, a legacy
(2025) session. Each is bound to the principal of the token that started it."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_stateless import App, Context, TaskRuntime

app = App("sessions", "1.0.0", tasks=TaskRuntime(poll_interval_ms=50))

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@app.tool(blocking=False)
def whoami(ctx: Context) -> dict[str, Any]:
    return {"id": ctx.principal.id}


@app.tool()
def ask_name(ctx: Context) -> str:
    """One MRTR round (a server->client elicitation on the legacy path)."""
    answer = ctx.elicit("What is your name?", NAME_FORM, key="name")
    return f"Hello, {(answer.content or {}).get('name', '?')}"


@app.tool(task="optional")
async def slow(seconds: float) -> str:
    """Runs as a task for a client that declares the Tasks extension."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"
