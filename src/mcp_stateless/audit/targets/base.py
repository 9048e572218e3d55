"""What every audit target shares: the `Target` and `Lane` protocols, reads bounded in bytes and messages, and the
record of every exchange a target carried."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Literal, Protocol

from ...client.errors import ChannelError, ClientError
from ...client.http11 import HttpError
from ..ledger import Ledger
from ..wire import Exchange, Message

Restart = Literal["all", "last"]
ACCEPT = "application/json, text/event-stream"


RECORD_MAX = 5000  # exchanges kept for the schema check: bounded whatever the audit does
MESSAGES_MAX = 1000  # messages kept per exchange or stream: a server flooding notifications is bounded too
# Bytes read of one response (a body, or an SSE stream however long it runs): a server answering with an endless
# or multi-gigabyte body must not take the auditor's memory with it. A real answer is far smaller.
BODY_MAX = 16 * 1024 * 1024


# What a body read past BODY_MAX is refused with (http11's BodyTooLarge, an HttpError).
TOO_LARGE = f"the response went past {BODY_MAX // (1024 * 1024)} MiB: the auditor stopped reading it"


class Recorder:
    """Every exchange the target carried (bounded), for checks that look at all of them at the end."""

    def __init__(self) -> None:
        self.recorded: list[Exchange] = []
        self.ledger = Ledger()
        # Tools whose call went unanswered within its timeout: a check that calls a tool several times (a
        # 10 s "long-running operation", say) would otherwise spend its whole budget waiting on one.
        self.slow_tools: set[str] = set()

    def record(self, ex: Exchange) -> Exchange:
        self.ledger.note(ex.request, ex.instance)  # unbounded by RECORD_MAX: the report lists every call
        if ex.timed_out and ex.request is not None and ex.request.get("method") == "tools/call":
            self.slow_tools.add(str((ex.request.get("params") or {}).get("name", "")))
        if len(self.recorded) < RECORD_MAX:
            self.recorded.append(ex)
        return ex


class TargetError(Exception):
    """The target cannot be reached or started at all: the audit cannot run."""


class Stream:
    """A long-lived response (subscriptions/listen): its messages as they arrive, kept as evidence too."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.queue: asyncio.Queue[Message] = asyncio.Queue()
        self.ended = asyncio.Event()

    def put(self, m: Message) -> None:
        if len(self.exchange.messages) < MESSAGES_MAX:
            self.exchange.messages.append(m)
        if self.queue.qsize() < MESSAGES_MAX:
            self.queue.put_nowait(m)

    async def next(self, timeout: float) -> Message | None:
        """The next message within `timeout` seconds, or None (nothing came, or the stream ended)."""
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            return None


async def _pump(stream: Stream, source: AsyncIterator[Message]) -> None:
    try:
        async for m in source:
            stream.put(m)
    except (HttpError, ClientError, ChannelError) as e:
        stream.exchange.failure = str(e)
    finally:
        stream.ended.set()


@contextlib.asynccontextmanager
async def streaming(stream: Stream, source: AsyncIterator[Message]) -> AsyncIterator[Stream]:
    task = asyncio.get_running_loop().create_task(_pump(stream, source))
    try:
        yield stream
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


class Lane(Protocol):
    instance: int

    async def send(self, message: Message, *, headers: Mapping[str, str | None] | None = None,
                   principal: str | None = None, timeout: float = 10.0) -> Exchange: ...

    async def notify(self, message: Message) -> None: ...


class Target(Protocol):
    kind: Literal["http", "stdio"]
    description: str
    instances: int
    can_restart: bool
    principals: dict[str, str]
    last_instance: int
    recorded: list[Exchange]
    ledger: Ledger
    slow_tools: set[str]

    @property
    def url(self) -> str | None:
        """The one URL that untargeted traffic goes to, when there is one."""

    async def start(self) -> None: ...

    def record(self, ex: Exchange) -> Exchange:
        """Keep `ex` as evidence (and in the ledger of calls), as every exchange the target carried."""

    async def send(self, message: Message | None, *, instance: int | None = None,
                   headers: Mapping[str, str | None] | None = None, http_method: str = "POST",
                   mirror: bool = True, principal: str | None = None, timeout: float = 10.0) -> Exchange: ...

    async def notify(self, message: Message) -> None: ...

    def lane(self, instance: int = 0) -> contextlib.AbstractAsyncContextManager[Lane]: ...

    def stream(self, message: Message, instance: int = 0) -> contextlib.AbstractAsyncContextManager[Stream]: ...

    async def restart(self, which: Restart = "all") -> None: ...

    async def aclose(self) -> None: ...
