"""`mcp-stateless task get|cancel|wait TARGET ID`: control a durable task (the Tasks extension) by its id.

Any instance answers for any task, so these work from another process than the one that started the task
(`call --task`), even against another server instance sharing the state. `wait` polls at the server's
`pollIntervalMs`, answers input requests at the terminal, and draws the task's status on stderr meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING, Any

from . import progress
from .client import add_target, drive, open_client, print_result, print_task
from .progress import StatusLine

if TYPE_CHECKING:
    from ..client import TaskHandle

_ACTIONS = {
    "get": "show a task's status (its result once completed)",
    "cancel": "ask the server to cancel a task (cooperative: it may still finish)",
    "wait": "wait for a task to end and print its result like `call`",
}
TICK_S = 0.1  # how often the status line is redrawn between polls


def register(sub: Any) -> None:
    t = sub.add_parser("task", help="get, cancel or wait for a durable task by id",
                       description="Control a durable task (Tasks extension). TARGET is a URL or --stdio COMMAND.")
    actions = t.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, help_ in _ACTIONS.items():
        p = actions.add_parser(name, help=help_, description=help_ + ".")
        p.set_defaults(run=run)
        add_target(p)
        p.add_argument("rest", nargs="*", metavar="ID")
        if name == "wait":
            p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                           help="draw the task's status on stderr while waiting (default: when stderr is a "
                                "terminal)")
            p.add_argument("--wait-timeout", type=float, default=None, metavar="S",
                           help="give up (exit 1, the task keeps running) after this many seconds")


def run(args: argparse.Namespace) -> int:
    return drive(_run(args), args)


async def _run(args: Any) -> int:
    import asyncio

    from ..client import TaskHandle

    bar = StatusLine() if args.action == "wait" and progress.wanted(args.progress) else None
    async with open_client(args, tasks=True, line=bar) as c:
        handle = TaskHandle(c, c.handlers, {"resultType": "task", "taskId": args.task_id, "status": "working"})
        if args.action == "get":
            task = await handle.refresh()
            print_task(task, args.json)
            result = task.get("result")
            if not args.json and task.get("status") == "completed" and isinstance(result, dict):
                print_result(result, False)
            return 0
        if args.action == "cancel":
            await handle.cancel()
            print_task(await handle.refresh(), args.json)
            return 0
        await handle.refresh()
        ticker = asyncio.create_task(_redraw(bar, handle)) if bar is not None else None
        try:
            result = await handle.wait(timeout=args.wait_timeout)
        finally:
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
            if bar is not None:
                bar.close()
        return print_result(result, args.json)


async def _redraw(bar: StatusLine, handle: TaskHandle) -> None:
    """The spinner and elapsed time move between polls; the status is whatever the last poll saw."""
    import asyncio

    while True:
        bar.task(handle.task)
        await asyncio.sleep(TICK_S)
