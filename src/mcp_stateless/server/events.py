"""Change events for `subscriptions/listen`, behind a small interface so they can cross instances.

An `EventBus` carries `ChangeEvent`s from whoever changed something (a tool list, a resource) to every
open listen stream. `MemoryEventBus` serves one process; a shared implementation (Redis pub/sub) fans
out across instances with the same interface.
"""

from __future__ import annotations

import asyncio
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
    __slots__ = ("_bus", "_queue")

    def __init__(self, bus: MemoryEventBus) -> None:
        self._bus = bus
        self._queue: asyncio.Queue[ChangeEvent] = asyncio.Queue(maxsize=bus.max_backlog)

    def put(self, event: ChangeEvent) -> None:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            # A stalled reader loses the oldest event, never the process's memory.
            self._queue.get_nowait()
            self._queue.put_nowait(event)

    async def get(self, timeout: float | None) -> ChangeEvent | None:
        if timeout is None:
            return await self._queue.get()
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None

    def end(self) -> None:
        self.put(END)

    def close(self) -> None:
        self._bus._subs.discard(self)


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
