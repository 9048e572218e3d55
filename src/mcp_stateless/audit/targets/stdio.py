"""One server process over stdio; a lane is another process of the same command."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import AsyncIterator, Mapping
from typing import Literal

from ...client.channels import StdioChannel
from ...client.errors import ChannelError, ClientError
from ..wire import Exchange, Message
from .base import MESSAGES_MAX, Lane, Recorder, Restart, Stream, TargetError, streaming


async def _stdio_exchange(chan: StdioChannel, message: Message, timeout: float) -> Exchange:
    ex = Exchange(message, "stdio")
    try:
        async with asyncio.timeout(timeout):
            stream = await chan.exchange(message)
            try:
                async for m in stream:
                    done = "method" not in m
                    if done or len(ex.messages) < MESSAGES_MAX - 1:  # bounded, with room for the response
                        ex.messages.append(m)
                    if done:
                        break
                if ex.response is None and not ex.failure:
                    ex.failure = chan.exit_reason()
            finally:
                await stream.aclose()
    except TimeoutError:
        ex.failure, ex.timed_out = f"no response within {timeout:g} s", True
    except (ClientError, ChannelError) as e:  # ServerLost (a ChannelError): the process exited or never ran
        ex.failure = str(e)
    return ex


class _StdioLane:
    instance = 0

    def __init__(self, target: StdioTarget) -> None:
        self.target = target
        self.chan = StdioChannel(target.argv, env=target.env, max_restarts=0, stderr=asyncio.subprocess.DEVNULL)

    async def send(self, message: Message, *, headers: Mapping[str, str | None] | None = None,
                   principal: str | None = None, timeout: float = 10.0) -> Exchange:
        return self.target.record(await _stdio_exchange(self.chan, message, timeout))

    async def notify(self, message: Message) -> None:
        with contextlib.suppress(ClientError, ChannelError):
            await self.chan.send(message)


class StdioTarget(Recorder):
    """One server process over stdio; a lane is another process of the same command."""

    kind: Literal["http", "stdio"] = "stdio"
    instances = 1
    can_restart = True
    last_instance = 0
    url = None

    def __init__(self, command: str, principals: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.argv = shlex.split(command)
        if not self.argv:
            raise TargetError("empty --stdio command")
        self.principals = dict(principals or {})
        # stdio authenticates once per process, from its environment (how our own servers take a token).
        token = next(iter(self.principals.values()), None)
        self.env = {"MCP_STATELESS_AUTHORIZATION": f"Bearer {token}"} if token else None
        self.description = f"stdio: {command}"
        self.chan = self._channel()

    def _channel(self) -> StdioChannel:
        return StdioChannel(self.argv, env=self.env, max_restarts=0, stderr=asyncio.subprocess.DEVNULL)

    async def start(self) -> None:
        try:
            await self.chan.start()
        except (ClientError, ChannelError) as e:  # e.g. the command does not exist
            raise TargetError(str(e)) from None

    async def send(self, message: Message | None, *, instance: int | None = None,
                   headers: Mapping[str, str | None] | None = None, http_method: str = "POST",
                   mirror: bool = True, principal: str | None = None, timeout: float = 10.0) -> Exchange:
        assert message is not None, "stdio carries messages only"
        return self.record(await _stdio_exchange(self.chan, message, timeout))

    async def notify(self, message: Message) -> None:
        with contextlib.suppress(ClientError, ChannelError):
            await self.chan.send(message)

    @contextlib.asynccontextmanager
    async def lane(self, instance: int = 0) -> AsyncIterator[Lane]:
        lane = _StdioLane(self)
        try:
            yield lane
        finally:
            await lane.chan.aclose()

    @contextlib.asynccontextmanager
    async def stream(self, message: Message, instance: int = 0) -> AsyncIterator[Stream]:
        """The request on the main process; leaving the block sends notifications/cancelled for it."""
        st = Stream(Exchange(message, "stdio"))
        self.ledger.note(message, 0)
        ex = await self.chan.exchange(message)

        async def source() -> AsyncIterator[Message]:
            async for m in ex:
                yield m

        try:
            async with streaming(st, source()) as out:
                yield out
        finally:
            await ex.aclose()

    async def restart(self, which: Restart = "all") -> None:
        await self.chan.aclose()
        self.chan = self._channel()
        await self.start()

    async def aclose(self) -> None:
        await self.chan.aclose()
