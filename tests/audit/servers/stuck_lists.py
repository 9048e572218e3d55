"""Broken on purpose: tools/list waits for a per-process warm-up that never finishes, on every instance.

Every instance fails to answer in the same way, which is no evidence that they answer alike: the
auditor must not call that a pass of stateless.instances.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from mcp_stateless import App
from mcp_stateless.protocol.endpoint import Call, Handler, ListenItem, Lister, Reply
from mcp_stateless.protocol.envelope import Request

app = App("stuck-lists", "1.0.0")
WARM = asyncio.Event()  # set by a warm-up task nobody starts


@app.tool()
def ping() -> str:
    """Answers at once."""
    return "pong"


class WaitForWarmUp:
    async def handle(self, req: Request, call: Call, call_next: Handler) -> Reply:
        if req.method == "tools/list":
            await WARM.wait()
        return await call_next(req, call)

    def listen(self, req: Request, call: Call, call_next: Lister) -> AsyncGenerator[ListenItem, None]:
        return call_next(req, call)


app.add_request_middleware(WaitForWarmUp())
