"""A real channel to a real 2025 server (`MemoryChannel`) that records the requests it carries and whose
exchanges of some methods fail the way a dead upstream's do (a `ChannelError`) or never answer, for as long
as those methods are named in `failing` or `hanging`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar

from mcp_stateless.client.channels.base import Exchange, Message, Restarted, Unsolicited
from mcp_stateless.client.errors import ChannelError
from mcp_stateless.client.memory import MemoryChannel


class FailingChannel:
    # class-wide: the bridge makes its channels itself; tests `reset` them
    failing: ClassVar[set[str]] = set()
    hanging: ClassVar[set[str]] = set()
    requests: ClassVar[list[tuple[str, Any]]] = []  # (method, params) of every request exchanged, in order

    def __init__(self, inner: MemoryChannel) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.key = inner.key
        self.mirrors_headers = inner.mirrors_headers

    @classmethod
    def reset(cls) -> None:
        cls.failing, cls.hanging, cls.requests = set(), set(), []

    async def start(self) -> None:
        await self.inner.start()

    def watch(self, on_unsolicited: Unsolicited | None, on_restart: Restarted | None) -> None:
        self.inner.watch(on_unsolicited, on_restart)

    async def exchange(self, message: Message, headers: Mapping[str, str] | None = None, *,
                       timeout: float | None = -1.0) -> Exchange:
        method = message.get("method")
        if isinstance(method, str):
            FailingChannel.requests.append((method, message.get("params")))
        if method in FailingChannel.failing:
            raise ChannelError("the upstream went away")
        if method in FailingChannel.hanging:
            await asyncio.Event().wait()
        return await self.inner.exchange(message, headers, timeout=timeout)

    async def send(self, message: Message, headers: Mapping[str, str] | None = None) -> int:
        return await self.inner.send(message, headers)

    async def aclose(self) -> None:
        await self.inner.aclose()
