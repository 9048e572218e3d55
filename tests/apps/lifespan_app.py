"""An app with a lifespan, an HTTP route and a middleware, for the serve/mount/in-memory tests.

The lifespan writes `enter <pid>` and `exit <pid>` lines to the file named by LIFESPAN_LOG (if set), so a
test can count how often each process entered and left it; `whoami` answers from what it yielded.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from mcp_stateless import App, Context, TaskRuntime
from mcp_stateless.protocol.asgi import AsgiApp, Message, Receive, Scope, Send


@dataclass
class Resources:
    pid: int
    calls: list[str] = field(default_factory=list)


def _record(event: str) -> None:
    path = os.environ.get("LIFESPAN_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{event} {os.getpid()}\n")


@asynccontextmanager
async def lifespan(app: App) -> AsyncIterator[Resources]:
    _record("enter")
    try:
        yield Resources(os.getpid())
    finally:
        _record("exit")


# A task runtime, so that its lease sweeper runs (and meets the store going away) in the readiness tests.
app = App("lifespan-test", "1.0.0", lifespan=lifespan, tasks=TaskRuntime())


@app.tool()
async def whoami(ctx: Context, label: str = "") -> str:
    """The process and how many calls its lifespan resources have seen."""
    res: Resources = ctx.lifespan
    res.calls.append(label)
    return f"{res.pid}:{len(res.calls)}"


@app.route("/version")
async def version(scope: Scope, receive: Receive, send: Send) -> None:
    body = f'{{"name": "{app.name}", "version": "{app.version}"}}'.encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


def served_by(inner: AsgiApp) -> AsgiApp:
    """Adds `x-served-by: <pid>` to every HTTP response."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), (b"x-served-by", b"%d" % os.getpid())]}
            await send(message)

        await inner(scope, receive, send_with_header)

    return wrapped


app.add_middleware(served_by)
