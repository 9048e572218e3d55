"""Change events for `subscriptions/listen`, and the in-process fan-out every bus delivers through.

An `EventBus` carries `ChangeEvent`s from whoever changed something (a tool list, a resource, a task) to
every open listen stream. `MemoryEventBus` serves one process and hands the event objects straight to
the readers; `ChangeEventBus` puts the same events on one topic of an engine's `Bus`, so they cross
processes and machines with the same interface.
"""

from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

import orjson

from .base import Bus, TopicSubscription

EventKind = Literal["tools", "prompts", "resources", "resource_updated", "task", "end"]
T = TypeVar("T")

CHANGES_TOPIC = "changes"


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """`audience`, when set, is the one principal (its id) whose listen streams hear the event: a change
    seen by an upstream session opened with that caller's credentials (the bridge's) tells of that caller's
    view, so it is never fanned out to another's."""

    kind: EventKind
    uri: str | None = None  # the resource URI, or the task id for "task" events
    audience: str | None = None


END = ChangeEvent("end")


class ChangeSubscription(Protocol):
    async def ready(self) -> None:
        """Return once events published from now on reach this subscription (on a shared bus: once the
        process is subscribed there). `App.listen` awaits it before acknowledging."""
        ...

    async def get(self, timeout: float | None) -> ChangeEvent | None:
        """Next event, or None when `timeout` seconds pass without one."""
        ...

    def end(self) -> None:
        """Make the reader's next `get()` return the `END` event (graceful shutdown of this instance)."""
        ...

    def close(self) -> None: ...


class EventBus(Protocol):
    async def publish(self, event: ChangeEvent) -> None: ...

    def subscribe(self) -> ChangeSubscription: ...


class QueueSubscription(Generic[T]):
    """perf: a bounded deque plus at most one waiting future (and one timer) per idle reader, instead
    of an asyncio.Queue and a wait_for() task per wait: ten thousand idle listen streams stay small
    and one publish wakes each reader directly."""

    __slots__ = ("_max_backlog", "_owner", "_queue", "_waiter")

    def __init__(self, owner: set[QueueSubscription[T]], max_backlog: int) -> None:
        self._owner = owner
        self._max_backlog = max_backlog
        # A stalled reader loses the oldest item (maxlen drops it), never the process's memory.
        # Made on first need: an idle reader's items go straight to its waiter.
        self._queue: collections.deque[T] | None = None
        self._waiter: asyncio.Future[T | None] | None = None

    async def ready(self) -> None:
        return None

    def put(self, item: T) -> None:
        """Deliver `item` to this reader only."""
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(item)  # hand it straight to the waiting reader
            return
        if self._queue is None:
            self._queue = collections.deque(maxlen=self._max_backlog)
        self._queue.append(item)

    async def get(self, timeout: float | None) -> T | None:
        if self._queue:
            return self._queue.popleft()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[T | None] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            return await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def close(self) -> None:
        self._owner.discard(self)
        self._queue = None


def _expire(waiter: asyncio.Future[T | None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _ChangeQueue(QueueSubscription[ChangeEvent]):
    __slots__ = ()

    def end(self) -> None:
        self.put(END)


class MemoryEventBus:
    """In-process fan-out of event objects: correct for one process only."""

    def __init__(self, max_backlog: int = 256) -> None:
        self.max_backlog = max_backlog
        self._subs: set[QueueSubscription[ChangeEvent]] = set()

    async def publish(self, event: ChangeEvent) -> None:
        for sub in tuple(self._subs):
            sub.put(event)

    def subscribe(self) -> ChangeSubscription:
        sub = _ChangeQueue(self._subs, self.max_backlog)
        self._subs.add(sub)
        return sub

    @property
    def subscriber_count(self) -> int:
        return len(self._subs)


class _TopicQueue(QueueSubscription[bytes]):
    __slots__ = ("_fanout", "_topic")

    def __init__(self, fanout: Fanout, topic: str, owner: set[QueueSubscription[bytes]]) -> None:
        super().__init__(owner, fanout.max_backlog)
        self._fanout = fanout
        self._topic = topic

    def close(self) -> None:
        super().close()
        self._fanout.forget_if_unread(self._topic)


class Fanout:
    """The readers of each topic in this process: what every engine's bus delivers to."""

    def __init__(self, max_backlog: int = 256, *, on_change: Callable[[], None] | None = None) -> None:
        self.max_backlog = max_backlog
        self._topics: dict[str, set[QueueSubscription[bytes]]] = {}
        # Called when a topic gains its first reader or loses its last one: a bus that subscribes per
        # topic on the server (sharded pub/sub, LISTEN) follows the set of topics with it.
        self._on_change = on_change

    def subscribe(self, topic: str) -> QueueSubscription[bytes]:
        subs = self._topics.get(topic)
        if subs is None:
            subs = self._topics[topic] = set()
            if self._on_change is not None:
                self._on_change()
        sub = _TopicQueue(self, topic, subs)
        subs.add(sub)
        return sub

    def deliver(self, topic: str, payload: bytes) -> None:
        for sub in tuple(self._topics.get(topic, ())):
            sub.put(payload)

    def forget_if_unread(self, topic: str) -> None:
        if not self._topics.get(topic, True):
            del self._topics[topic]  # its last reader left (per-session topics come and go)
            if self._on_change is not None:
                self._on_change()

    def has(self, topic: str) -> bool:
        return topic in self._topics

    @property
    def topics(self) -> frozenset[str]:
        """The topics that have a reader in this process."""
        return frozenset(self._topics)

    @property
    def listening(self) -> bool:
        """Whether any topic has a reader (a shared bus's reader stops when nobody listens)."""
        return bool(self._topics)


class SharedSubscription:
    """A reader of a shared bus (SQLite file, Redis): its queue is the process's fan-out, and `ready()`
    waits until the engine's reader is live, so nothing published after a listen acknowledgement is missed."""

    __slots__ = ("_inner", "_ready")

    def __init__(self, inner: QueueSubscription[bytes], ready: Callable[[], Awaitable[None]]) -> None:
        self._inner = inner
        self._ready = ready

    async def ready(self) -> None:
        await self._ready()

    async def get(self, timeout: float | None) -> bytes | None:
        return await self._inner.get(timeout)

    def put(self, payload: bytes) -> None:
        self._inner.put(payload)

    def close(self) -> None:
        self._inner.close()


def encode_change(event: ChangeEvent) -> bytes:
    if event.audience is None:  # the payload every reader already knows
        return orjson.dumps([event.kind, event.uri])
    return orjson.dumps([event.kind, event.uri, event.audience])


@functools.lru_cache(maxsize=1024)
def decode_change(payload: bytes) -> ChangeEvent | None:
    """The event a payload carries, or None when it is malformed. Cached: every reader of one event
    receives the same bytes, so it is decoded once per process, not once per reader."""
    try:
        kind, uri, *rest = orjson.loads(payload)
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return None
    if kind not in ("tools", "prompts", "resources", "resource_updated", "task", "end"):
        return None
    if uri is not None and not isinstance(uri, str):
        return None
    if not rest:
        return ChangeEvent(kind, uri)
    # An addressed event whose audience cannot be read is dropped, never heard by everyone.
    if len(rest) != 1 or not isinstance(rest[0], str):
        return None
    return ChangeEvent(kind, uri, rest[0])


_END_PAYLOAD = encode_change(END)


class _ChangeSubscription:
    __slots__ = ("_inner",)

    def __init__(self, inner: TopicSubscription) -> None:
        self._inner = inner

    async def ready(self) -> None:
        await self._inner.ready()

    async def get(self, timeout: float | None) -> ChangeEvent | None:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            payload = await self._inner.get(left)
            if payload is None:
                return None
            event = decode_change(payload)
            if event is not None:
                return event  # a malformed payload from another process is skipped

    def end(self) -> None:
        self._inner.put(_END_PAYLOAD)

    def close(self) -> None:
        self._inner.close()


class ChangeEventBus:
    """Change events as one topic of an engine's `Bus`."""

    def __init__(self, bus: Bus, topic: str = CHANGES_TOPIC) -> None:
        self.bus = bus
        self.topic = topic

    async def publish(self, event: ChangeEvent) -> None:
        await self.bus.publish(self.topic, encode_change(event))

    def subscribe(self) -> ChangeSubscription:
        return _ChangeSubscription(self.bus.subscribe(self.topic))
