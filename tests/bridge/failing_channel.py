"""A real channel to a real 2025 server (`MemoryChannel`) that records the requests it carries and whose
exchanges of some methods fail the way a dead upstream's do (a `ChannelError`) or never answer, for as long
as those methods are named in `failing` or `hanging`; with `refusing` (an HTTP status) it answers every
exchange as an HTTP upstream that rejects the credentials does; `breaks_on_close` makes closing it fail."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar

from mcp_stateless.client.channels.base import Exchange, Message, Restarted, Unsolicited
from mcp_stateless.client.errors import AuthenticationError, ChannelError
from mcp_stateless.client.memory import MemoryChannel


class FailingChannel:
    # class-wide: the bridge makes its channels itself; tests `reset` them
    failing: ClassVar[set[str]] = set()
    hanging: ClassVar[set[str]] = set()
    requests: ClassVar[list[tuple[str, Any]]] = []  # (method, params) of every request exchanged, in order
    refusing: ClassVar[int | None] = None
    breaks_on_close: ClassVar[bool] = False
    closed: ClassVar[int] = 0  # channels closed so far

    def __init__(self, inner: MemoryChannel) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.key = inner.key
        self.mirrors_headers = inner.mirrors_headers

    @classmethod
    def reset(cls) -> None:
        cls.failing, cls.hanging, cls.requests = set(), set(), []
        cls.refusing, cls.breaks_on_close, cls.closed = None, False, 0

    async def start(self) -> None:
        await self.inner.start()

    def watch(self, on_unsolicited: Unsolicited | None, on_restart: Restarted | None) -> None:
        self.inner.watch(on_unsolicited, on_restart)

    async def exchange(self, message: Message, headers: Mapping[str, str] | None = None, *,
                       timeout: float | None = -1.0) -> Exchange:
        method = message.get("method")
        if isinstance(method, str):
            FailingChannel.requests.append((method, message.get("params")))
        if FailingChannel.refusing is not None:  # as an HTTP upstream answers a credential it rejects
            raise AuthenticationError(FailingChannel.refusing, b"", {})
        if method in FailingChannel.failing:
            raise ChannelError("the upstream went away")
        if method in FailingChannel.hanging:  # no answer: the channel's own bound is all that ends it
            if timeout is not None and timeout >= 0:
                await asyncio.sleep(timeout)
                raise TimeoutError(f"no answer within {timeout} s")
            await asyncio.Event().wait()
        return await self.inner.exchange(message, headers, timeout=timeout)

    async def send(self, message: Message, headers: Mapping[str, str] | None = None) -> int:
        return await self.inner.send(message, headers)

    async def aclose(self) -> None:
        await self.inner.aclose()
        FailingChannel.closed += 1
        if FailingChannel.breaks_on_close:
            raise ChannelError("the upstream was gone already")
