"""The Tasks extension (guide step 8: work that must outlive a stream) under the balancer and restart tests:
a task created on one instance is polled, fed and cancelled through the others, and survives a restart of
every instance."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ...protocol.tasks import EXTENSION_ID
from ..engine import Check, Context, Outcome
from ..wire import FULL_CAPS, Exchange, modern
from .calls import call, input_responses, run_rounds

TASK_CAPS: dict[str, Any] = {**FULL_CAPS, "extensions": {EXTENSION_ID: {}}}
TERMINAL = ("completed", "failed", "cancelled")
MAX_POLLS = 40
POLL_FOR = 20.0

FIX = ("Keep task records in a store every instance reads and that outlives a process (not a dict or an "
       "in-process queue), run the work under a lease any instance can take over, and answer tasks/get, "
       "tasks/update and tasks/cancel from that store on every instance.")
NONE_FOUND = ("skipped: no argument-free tool became a task (name one with --task-tool NAME or "
              "NAME=JSON-ARGUMENTS)")


def _offered(ctx: Context) -> bool:
    return EXTENSION_ID in ((ctx.profile.capabilities.get("extensions")) or {})


def _task_request(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return call(name, arguments, caps=TASK_CAPS)


async def create_task(ctx: Context) -> tuple[str, list[Exchange]] | None:
    """A new task (MRTR rounds before it answered): its id and the exchanges that made it."""
    if ctx.options.task_tool is not None:
        candidates = [ctx.options.task_tool]
    elif ctx.profile.task_tool is not None:
        candidates = [ctx.profile.task_tool]
    else:
        candidates = [(t["name"], {}) for t in ctx.probe_tools(limit=30)]
    for name, args in candidates:
        rounds = await run_rounds(ctx, _task_request(name, args))
        res = rounds.last.result or {}
        if res.get("resultType") == "task" and isinstance(res.get("taskId"), str):
            ctx.profile.task_tool = (name, args)
            return res["taskId"], rounds.exchanges
    return None


def _tasks(method: str, task_id: str, **params: Any) -> dict[str, Any]:
    return modern(method, {"taskId": task_id, **params}, caps=TASK_CAPS)


async def poll(ctx: Context, task_id: str, *, feed: bool = True) -> tuple[Exchange, list[Exchange]]:
    """tasks/get on each instance in turn until the task is terminal (answering input it asks for with
    tasks/update through yet another instance); the last get and every exchange on the way."""
    t, seen = ctx.target, []
    answered: set[str] = set()
    deadline = time.monotonic() + POLL_FOR
    last = Exchange(None)
    for _ in range(MAX_POLLS):
        last = await t.send(_tasks("tasks/get", task_id), timeout=ctx.options.call_timeout)
        seen.append(last)
        res = last.result or {}
        status = res.get("status")
        if last.result is None or status in TERMINAL or time.monotonic() > deadline:
            break
        if feed and status == "input_required":
            asked = res.get("inputRequests") if isinstance(res.get("inputRequests"), dict) else {}
            pending = {k: v for k, v in (asked or {}).items() if k not in answered}
            answered |= set(pending)  # a question left unanswered (sampling) is not asked about again
            todo = input_responses(pending, ctx.options.answers, t.ledger)
            if todo:
                seen.append(await t.send(_tasks("tasks/update", task_id, inputResponses=todo),
                                         timeout=ctx.options.call_timeout))
        interval = res.get("pollIntervalMs")
        await asyncio.sleep(min(max((interval if isinstance(interval, int) else 200) / 1000, 0.05), 1.0))
    return last, seen


def _where_unknown(gets: list[Exchange], task_id: str) -> list[str]:
    """The instances whose tasks/get did not answer with this task, each with what it said instead."""
    return [f"instance {g.instance + 1}: {g.outcome()}" for g in gets
            if (g.result or {}).get("taskId") != task_id]


async def across_instances(ctx: Context) -> Outcome:
    if not _offered(ctx):
        return Outcome("skip", "skipped: the server does not offer the tasks extension")
    made = await create_task(ctx)
    if made is None:
        return Outcome("skip", NONE_FOUND)
    task_id, created = made
    t = ctx.target
    gets = [await t.send(_tasks("tasks/get", task_id), instance=i, timeout=ctx.options.call_timeout)
            for i in range(t.instances)]
    unknown = _where_unknown(gets, task_id)
    if unknown:
        return Outcome("fail", f"task {task_id} created on instance {created[-1].instance + 1} is unknown "
                               "elsewhere: " + "; ".join(unknown), [created[-1], *gets], FIX)
    last, seen = await poll(ctx, task_id)
    status = (last.result or {}).get("status")
    if status not in TERMINAL:
        return Outcome("fail", f"task {task_id} did not finish within {POLL_FOR:g} s of polling through every "
                               f"instance (last: {status or last.outcome()})", [created[-1], *seen[-2:]], FIX)
    # A second task, cancelled through another instance than the one that created it.
    second = await create_task(ctx)
    if second is None:
        return Outcome("warn", f"task {task_id} ended {status}; a second task could not be created to cancel")
    other_id, _ = second
    cancel = await t.send(_tasks("tasks/cancel", other_id), timeout=ctx.options.call_timeout)
    if cancel.result is None:
        return Outcome("fail", f"tasks/cancel through another instance gave {cancel.outcome()}", [cancel], FIX)
    after, _ = await poll(ctx, other_id, feed=False)
    final = (after.result or {}).get("status")
    if final not in TERMINAL:
        return Outcome("fail", f"task {other_id} cancelled through instance {cancel.instance + 1} was still "
                               f"{final or after.outcome()} after {POLL_FOR:g} s", [cancel, after], FIX)
    tool = ctx.profile.task_tool[0] if ctx.profile.task_tool else "?"
    return Outcome("pass", f"a {tool} task seen by all {t.instances} instance(s), polled and fed to {status}; "
                           f"another, cancelled through instance {cancel.instance + 1}, ended {final}",
                   [created[-1], last, cancel, after])


async def after_restart(ctx: Context) -> Outcome:
    if not _offered(ctx):
        return Outcome("skip", "skipped: the server does not offer the tasks extension")
    made = await create_task(ctx)
    if made is None:
        return Outcome("skip", NONE_FOUND)
    task_id, created = made
    await ctx.target.restart("all")
    last, seen = await poll(ctx, task_id)
    status = (last.result or {}).get("status")
    if status not in TERMINAL:
        return Outcome("fail", f"task {task_id} after a restart of every instance: {status or last.outcome()}",
                       [created[-1], *seen[-2:]], FIX)
    note = (last.result or {}).get("statusMessage") or ((last.result or {}).get("error") or {}).get("message")
    tool = ctx.profile.task_tool[0] if ctx.profile.task_tool else "?"
    return Outcome("pass", f"a {tool} task survived a restart of every instance and ended {status}"
                           + (f" ({note})" if note else ""), [created[-1], last])


CHECKS = (
    Check("tasks.instances", 8, "A task is polled, fed and cancelled through every instance", across_instances,
          needs=frozenset({"modern", "calls"}), timeout=90),
    Check("tasks.restart", "restart", "A task survives a restart of every instance", after_restart,
          needs=frozenset({"modern", "restart", "calls"}), timeout=90),
)
