"""The app every cluster instance serves: examples/importer.py plus a few test tools.

The principal is read from `Authorization: Bearer <name>` (a stand-in for real OAuth, test only).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp_stateless import App, Context, Handle

_spec = importlib.util.spec_from_file_location(
    "_importer_example", Path(__file__).resolve().parents[2] / "examples" / "importer.py")
assert _spec is not None and _spec.loader is not None
importer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(importer)


class Ticket(Handle, prefix="tkt", ttl=1.0, noun="ticket", issued_by="new_ticket"):
    pass


def bearer(headers: Mapping[str, str] | None) -> str:
    auth = (headers or {}).get("authorization", "")
    return auth[len("Bearer "):] if auth.startswith("Bearer ") else "anonymous"


def build() -> App:
    app: App = importer.make_app(principal=bearer)

    @app.tool()
    async def new_ticket(ctx: Context) -> dict[str, Any]:
        return {"ticket": (await Ticket.mint(ctx)).id}

    @app.tool()
    async def use_ticket(ticket: Ticket) -> dict[str, Any]:
        return {"ok": True}

    @app.tool()
    def confirm(ctx: Context, item: str) -> dict[str, Any]:
        """Ask the user to confirm (MRTR): the retry may land on any instance."""
        answer = ctx.elicit(f"Really order {item}?", {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                                      "required": ["ok"]}, key="confirm")
        return {"item": item, "confirmed": bool(answer.content and answer.content.get("ok"))}

    @app.tool()
    async def touch(uri: str) -> dict[str, Any]:
        """Announce that a resource changed (to every listen stream on every instance)."""
        await app.notify_resource_updated(uri)
        return {"touched": uri}

    @app.tool()
    async def add_file_and_hold(importHandle: importer.Import, uri: str, pidfile: str) -> dict[str, Any]:
        """add_file whose answer the first instance to run it holds back (its write is committed), after
        writing its pid to `pidfile` so that a test can kill exactly that instance; a replay of the same
        call elsewhere (a proxy re-sending it) answers at once."""
        data = await importHandle.update(lambda d: d["files"].append(uri))
        marker = Path(pidfile)
        if not marker.exists():
            marker.write_text(str(os.getpid()))
            await asyncio.sleep(30)
        return {"files": len(data["files"])}

    @app.resource("file:///watched/{name}")
    def watched(name: str) -> str:
        return name

    add_task_tools(app)
    return app


def add_task_tools(app: App) -> None:
    """Tasks extension tools for tests/cluster/test_tasks_cluster.py (short leases so a dead instance is
    noticed quickly)."""
    from mcp_stateless import TaskRuntime

    app.enable_tasks(TaskRuntime(lease_s=1.5, sweep_interval_s=0.25, poll_interval_ms=100))

    @app.tool(task="optional", retry_safe=True)
    async def long_job(seconds: float) -> str:
        """Safe to repeat: another instance re-runs it if this one dies"""
        await asyncio.sleep(seconds)
        return f"long job done after {seconds:g}s"

    @app.tool(task="optional")
    async def fragile_job(seconds: float) -> str:
        """Not safe to repeat: marked failed if its instance dies"""
        await asyncio.sleep(seconds)
        return "fragile job done"

    @app.tool(task="optional")
    def approve(ctx: Context, item: str) -> str:
        answer = ctx.elicit(f"Approve {item}?", {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                                 "required": ["ok"]}, key="approve")
        return f"{item}: {'approved' if answer.content and answer.content.get('ok') else 'rejected'}"


app = build()
