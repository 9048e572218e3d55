"""A legacy call's messages waiting to be written (to its stream's log, or to a 2024-11-05 channel).

`emit` never blocks the handler and the backlog is bounded by the one policy of every transport
(`protocol/outbox.py`: progress coalesced, other notifications dropped beyond the bound and counted,
server->client requests kept); the one writer `take()`s what waits and `wait`s to be woken by a new
message or by the call's end (`wake`).
"""

from __future__ import annotations

import asyncio

from ...protocol.outbox import BoundedOutbox


class PendingMessages(BoundedOutbox):
    __slots__ = ("_wake",)

    def __init__(self) -> None:
        super().__init__()
        self.on_emit = self.wake
        self._wake: asyncio.Future[None] | None = None

    def wake(self) -> None:
        w = self._wake
        if w is not None and not w.done():
            w.set_result(None)

    async def wait(self, timeout: float | None = None) -> None:
        """Until the next `wake()` (a message, the stream closed, the call done), or `timeout` seconds."""
        loop = asyncio.get_running_loop()
        self._wake = wake = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _wake_up, wake)
        try:
            await wake
        finally:
            self._wake = None
            if timer is not None:
                timer.cancel()


def _wake_up(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
