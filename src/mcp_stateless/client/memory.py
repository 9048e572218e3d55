"""`MemoryChannel`: a client drives any `Endpoint` in the same process, with no socket and no subprocess.

It plays the transport's part: each message runs the envelope ladder (as on stdio: there are no HTTP
headers to check), a request goes to `endpoint.handle` with a `Call(transport="memory")` whose outbox feeds
the exchange (progress and log notifications arrive before the response, as on a stream), and
`subscriptions/listen` goes to `endpoint.listen`. Closing an unfinished exchange cancels the handler, the
way a dropped HTTP connection does. The caller is authenticated once, as a stdio process is: the principal
given, else what the endpoint's own authenticator makes of `headers`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..protocol.endpoint import Call, Endpoint, KeepAlive, ListenEnd, ListenEvent, authenticator_for
from ..protocol.envelope import Rejection, Request
from ..protocol.inbound import Cancel, Inbound
from ..protocol.principal import Challenge, Credentials, Principal
from .channels import Message, Restarted, Unsolicited
from .errors import AuthenticationError

log = logging.getLogger("mcp_stateless.client")

_END = object()


class _QueueOutbox:
    __slots__ = ("_queue",)

    def __init__(self, queue: asyncio.Queue[Any]) -> None:
        self._queue = queue

    def emit(self, message: dict[str, Any]) -> None:
        self._queue.put_nowait(message)


class MemoryExchange:
    """The messages of one in-memory request: what the handler emitted, then its reply."""

    __slots__ = ("_done", "_queue", "_task")

    status = 200
    session_id = None

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._done = False

    async def __aiter__(self) -> AsyncIterator[Message]:
        while not self._done:
            item = await self._queue.get()
            if item is _END:
                self._done = True
                return
            yield item

    async def aclose(self) -> None:
        self._done = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


class MemoryChannel:
    """A channel to an `Endpoint` object (e.g. an `App`): `Client(app)`."""

    kind = "memory"
    mirrors_headers = False

    def __init__(
        self, endpoint: Endpoint, *, principal: Principal | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        self.endpoint = endpoint
        self._principal = principal
        self._credentials = Credentials("memory", {k.lower(): v for k, v in (headers or {}).items()})
        self._started = False
        self._inbound: Inbound[MemoryExchange] | None = None  # the one in-flight table (protocol/inbound.py)

    def _core(self) -> Inbound[MemoryExchange]:
        if self._inbound is None:
            self._inbound = Inbound(self.endpoint.table, self.endpoint.supported_versions)
        return self._inbound

    @property
    def key(self) -> str:
        return f"memory:{id(self.endpoint):x}"

    @property
    def principal(self) -> Principal | None:
        """Who the requests are answered for (known once the channel started)."""
        return self._principal

    async def start(self) -> None:
        if self._started:
            return
        if self._principal is None:
            found = await authenticator_for(self.endpoint).authenticate(self._credentials)
            if isinstance(found, Challenge):
                raise AuthenticationError(found.status, found.message.encode(),
                                          {"www-authenticate": found.www_authenticate})
            self._principal = found
        self._started = True
        await self.endpoint.startup()

    def watch(self, on_unsolicited: Unsolicited | None, on_restart: Restarted | None) -> None:
        return None  # every message belongs to the exchange of the request it answers

    async def exchange(
        self, message: Message, headers: Mapping[str, str] | None = None, *, timeout: float | None = -1.0
    ) -> MemoryExchange:
        await self.start()
        ex = MemoryExchange()
        core = self._core()
        decision = core.receive(message)
        if isinstance(decision, Request):
            ex._task = asyncio.get_running_loop().create_task(self._run(decision, ex))
            core.inflight.start(decision.id, ex)
            return ex
        if isinstance(decision, Rejection):
            body = decision.body()
            if body is not None:
                ex._queue.put_nowait(body)
        elif isinstance(decision, Cancel) and decision.entry is not None:
            await decision.entry.aclose()
        ex._queue.put_nowait(_END)
        return ex

    async def _run(self, req: Request, ex: MemoryExchange) -> None:
        assert self._principal is not None  # `exchange` started the channel
        queue = ex._queue
        call = Call(self._principal, "memory", _QueueOutbox(queue))
        try:
            if req.method == "subscriptions/listen":
                items = self.endpoint.listen(req, call)
                try:
                    async for item in items:
                        if isinstance(item, ListenEvent | ListenEnd):
                            queue.put_nowait(item.message)
                        elif not isinstance(item, KeepAlive):  # pragma: no cover - the union is closed
                            raise TypeError(f"unexpected listen item {item!r}")
                finally:
                    await items.aclose()  # the subscription behind it is released at once
            else:
                reply = await self.endpoint.handle(req, call)
                queue.put_nowait(reply.message)
        except Exception:  # the exchange then ends without a response: the client sees a broken stream
            log.exception("the endpoint failed answering %s", req.method)
        finally:
            self._core().inflight.finish(req.id, ex)  # before the end is seen: the id is free for the next call
            queue.put_nowait(_END)

    async def send(self, message: Message, headers: Mapping[str, str] | None = None) -> int:
        """`notifications/cancelled` stops the request it names, as on stdio (by the one id rule: `true`
        or `1.0` names nothing); other notifications have no effect on an endpoint (the seam carries
        requests). A malformed one is refused as a transport would."""
        decision = self._core().receive(message)
        if isinstance(decision, Cancel) and decision.entry is not None:
            await decision.entry.aclose()  # the handler is cancelled; its exchange ends without a response
        return decision.status if isinstance(decision, Rejection) else 202

    async def aclose(self) -> None:
        if self._started:
            self._started = False
            await self.endpoint.aclose()


__all__ = ["MemoryChannel", "MemoryExchange"]
