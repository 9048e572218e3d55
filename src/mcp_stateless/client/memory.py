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
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping

from ..protocol.endpoint import Call, Endpoint, KeepAlive, ListenEnd, ListenEvent, authenticator_for
from ..protocol.envelope import Rejection, Request
from ..protocol.inbound import Cancel, Inbound
from ..protocol.outbox import BoundedOutbox
from ..protocol.principal import Challenge, Credentials, Principal
from .channels import Message, Restarted, Unsolicited
from .errors import AuthenticationError

log = logging.getLogger("mcp_stateless.client")

class MemoryExchange:
    """The messages of one in-memory request: what the handler emitted, then its reply.

    The handler's notifications wait in a `BoundedOutbox`, the same bound and drop policy as on HTTP and
    stdio (protocol/outbox.py), so a consumer that reads slower than a handler emits sees the same
    coalesced progress as a remote client would; listen events and the reply are never dropped."""

    __slots__ = ("_done", "_ended", "_out", "_task", "_waiter", "outbox")

    status = 200
    session_id = None

    def __init__(self) -> None:
        self.outbox = BoundedOutbox(wake=self._wake)
        self._out: collections.deque[Message] = collections.deque()  # listen events, then the reply
        self._task: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._done = False

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def put(self, message: Message) -> None:
        self._out.append(message)
        self._wake()

    def end(self) -> None:
        self._ended = True
        self._wake()

    async def __aiter__(self) -> AsyncIterator[Message]:
        outbox = self.outbox
        while not self._done:
            if outbox.pending or outbox.dropped:  # what the handler emitted goes before its reply
                for message in outbox.take():
                    yield message
            elif self._out:
                yield self._out.popleft()
            elif self._ended:
                self._done = True
            else:
                self._waiter = asyncio.get_running_loop().create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None

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
                ex.put(body)
        elif isinstance(decision, Cancel) and decision.entry is not None:
            await decision.entry.aclose()
        ex.end()
        return ex

    async def _run(self, req: Request, ex: MemoryExchange) -> None:
        assert self._principal is not None  # `exchange` started the channel
        call = Call(self._principal, "memory", ex.outbox)
        try:
            if req.method == "subscriptions/listen":
                items = self.endpoint.listen(req, call)
                try:
                    async for item in items:
                        if isinstance(item, ListenEvent | ListenEnd):
                            ex.put(item.message)
                        elif not isinstance(item, KeepAlive):  # pragma: no cover - the union is closed
                            raise TypeError(f"unexpected listen item {item!r}")
                finally:
                    await items.aclose()  # the subscription behind it is released at once
            else:
                reply = await self.endpoint.handle(req, call)
                ex.outbox.enabled = False  # answered: nothing the handler left behind comes after the reply
                ex.put(reply.message)
        except Exception:  # the exchange then ends without a response: the client sees a broken stream
            log.exception("the endpoint failed answering %s", req.method)
        finally:
            self._core().inflight.finish(req.id, ex)  # before the end is seen: the id is free for the next call
            ex.end()

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
