"""Change events for `subscriptions/listen`, behind a small interface so they can cross instances.

An `EventBus` carries `ChangeEvent`s from whoever changed something (a tool list, a resource) to every
open listen stream. `MemoryEventBus` serves one process; a shared implementation (Redis pub/sub) fans
out across instances with the same interface.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass
from typing import Literal, Protocol

EventKind = Literal["tools", "prompts", "resources", "resource_updated", "task", "end"]


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    kind: EventKind
    uri: str | None = None  # the resource URI, or the task id for "task" events


class Subscription(Protocol):
    async def get(self, timeout: float | None) -> ChangeEvent | None:
        """Next event, or None when `timeout` seconds pass without one."""
        ...

    def end(self) -> None:
        """Make the reader's next `get()` return the `END` event (graceful shutdown of this instance)."""
        ...

    def close(self) -> None: ...


END = ChangeEvent("end")


class EventBus(Protocol):
    async def publish(self, event: ChangeEvent) -> None: ...

    def subscribe(self) -> Subscription: ...


class _QueueSubscription:
    """perf: a bounded deque plus at most one waiting future (and one timer) per idle reader, instead
    of an asyncio.Queue and a wait_for() task per wait: ten thousand idle listen streams stay small
    and one publish wakes each reader directly."""

    __slots__ = ("_bus", "_queue", "_waiter")

    def __init__(self, bus: MemoryEventBus) -> None:
        self._bus = bus
        # A stalled reader loses the oldest event (maxlen drops it), never the process's memory.
        # Made on first need: an idle reader's events go straight to its waiter.
        self._queue: collections.deque[ChangeEvent] | None = None
        self._waiter: asyncio.Future[ChangeEvent | None] | None = None

    def put(self, event: ChangeEvent) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(event)  # hand it straight to the waiting reader
            return
        if self._queue is None:
            self._queue = collections.deque(maxlen=self._bus.max_backlog)
        self._queue.append(event)

    async def get(self, timeout: float | None) -> ChangeEvent | None:
        if self._queue:
            return self._queue.popleft()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[ChangeEvent | None] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            return await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def end(self) -> None:
        self.put(END)

    def close(self) -> None:
        self._bus._subs.discard(self)


def _expire(waiter: asyncio.Future[ChangeEvent | None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class MemoryEventBus:
    """In-process fan-out: correct for one process only."""

    def __init__(self, max_backlog: int = 256) -> None:
        self.max_backlog = max_backlog
        self._subs: set[_QueueSubscription] = set()

    async def publish(self, event: ChangeEvent) -> None:
        self.publish_nowait(event)

    def publish_nowait(self, event: ChangeEvent) -> None:
        for sub in tuple(self._subs):
            sub.put(event)

    def subscribe(self) -> Subscription:
        sub = _QueueSubscription(self)
        self._subs.add(sub)
        return sub

    @property
    def subscriber_count(self) -> int:
        return len(self._subs)
