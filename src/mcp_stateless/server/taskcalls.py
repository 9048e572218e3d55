"""A tools/call that becomes a durable task, and the `ToolHost` through which the task runtime runs
this app's tools (on any instance, after any number of restarts)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol import errors
from ..protocol.envelope import Request
from ..protocol.errors import McpError
from ..protocol.mrtr import StateContext
from ..protocol.principal import Principal
from ..state import HandleStore
from ..state.events import ChangeEvent, EventBus
from ..tasks.host import Completed, NeedsInput, TaskOutcome
from ..tasks.model import TaskRecord
from ..tasks.runtime import TaskRuntime
from .catalog import Catalog
from .context import Context, InputRequired
from .invoke import run_tool
from .lifespan import LifespanRunner
from .registry import Tool
from .rounds import Rounds


async def outcome(run: Awaitable[dict[str, Any]]) -> TaskOutcome:
    """A tool run as the task runtime sees it: a result, or the questions it stopped at."""
    try:
        return Completed(await run)
    except InputRequired as exc:
        return NeedsInput({k: r.to_wire() for k, r in exc.requests.items()})


async def call_as_task(runtime: TaskRuntime, rounds: Rounds, tool: Tool, req: Request, ctx: Context,
                       sctx: StateContext | None, arguments: dict[str, Any]) -> dict[str, Any]:
    """The CreateTaskResult of a task-augmented tools/call (or, for a "manual" tool that finished or
    asked before detaching, its synchronous result)."""
    principal = ctx.principal.id
    if tool.detach == "start":
        rec = runtime.new_record(tool.name, req, principal, arguments, ctx.answers, ctx.principal.scopes)
        created = await runtime.create(rec)
        runtime.spawn(rec)
        return created
    # "manual": run inline (MRTR stays synchronous) until the handler awaits ctx.detach()
    loop = asyncio.get_running_loop()
    detached: asyncio.Future[tuple[TaskRecord, dict[str, Any]]] = loop.create_future()

    async def detach() -> None:
        rec = runtime.new_record(tool.name, req, principal, arguments, ctx.answers, ctx.principal.scopes)
        created = await runtime.create(rec)
        ctx.task_id, ctx.outbox = rec.task_id, None
        detached.set_result((rec, created))

    ctx._detach = detach
    runner = loop.create_task(run_tool(tool, ctx, arguments))
    try:
        await asyncio.wait((runner, detached), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        runner.cancel()
        raise
    if detached.done():
        rec, created = detached.result()
        runtime.spawn(rec, outcome(runner))
        return created
    try:
        return runner.result()
    except InputRequired as exc:
        return rounds.input_required(ctx, sctx, exc)


class AppToolHost:
    """Runs an app's tools for its `TaskRuntime` (the runtime sees nothing else of the app)."""

    __slots__ = ("_catalog", "_events", "_handles", "_lifespan")

    def __init__(self, catalog: Catalog, handles: Callable[[], HandleStore], events: Callable[[], EventBus],
                 lifespan: LifespanRunner | None = None) -> None:
        self._catalog = catalog
        self._handles = handles
        self._events = events
        self._lifespan = lifespan

    def retry_safe(self, tool: str) -> bool:
        found = self._catalog.tools.get(tool)
        return found is not None and found.retry_safe

    async def run(self, rec: TaskRecord) -> TaskOutcome:
        tool = self._catalog.tools.get(rec.tool)
        if tool is None:
            raise McpError(errors.INTERNAL_ERROR, f"tool {rec.tool!r} is no longer available")
        meta = rec.request_meta
        req = Request(rec.task_id, "tools/call", {"name": rec.tool, "arguments": rec.arguments},
                      meta.get("version", ""), meta.get("capabilities") or {}, meta.get("clientInfo"), None, None)
        # A replay knows the principal by its id and scopes: its claims are not kept in the task record.
        principal = Principal(rec.principal, frozenset(rec.principal_scopes))
        ctx = Context(req, principal, None, self._handles(), dict(rec.answers), {}, True,
                      asyncio.get_running_loop())
        ctx.task_id = rec.task_id
        if self._lifespan is not None:
            ctx.lifespan = self._lifespan.value
        return await outcome(run_tool(tool, ctx, rec.arguments))

    async def publish(self, task_id: str) -> None:
        await self._events().publish(ChangeEvent("task", task_id))
