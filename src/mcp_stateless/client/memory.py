"""`MemoryChannel`: a client drives any `Endpoint` in the same process, with no socket and no subprocess.

It plays the transport's part: each message runs the envelope ladder (as on stdio: there are no HTTP
headers to check), a request goes to `endpoint.handle` with a `Call(transport="memory")` whose outbox feeds
the exchange (progress and log notifications arrive before the response, as on a stream), and
`subscriptions/listen` goes to `endpoint.listen`. Closing an unfinished exchange cancels the handler, the
way a dropped HTTP connection does. The caller is authenticated once, as a stdio process is: the principal
given, else what the endpoint's own authenticator makes of `headers`.

With `legacy=` (a `LegacyEndpoint`, e.g. `LegacyServer(app)`) the channel also serves the 2025 era in
process, as a stdio process does: when the first message is `initialize`, the channel is one 2025
session (`legacy.stdio_session`), every later message goes to it, and what it writes is routed as a
stdio client routes lines (a response to its exchange, a progress notification by its token, anything
else, such as server->client requests and list changes, to the session's `watch` callback).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping

from ..protocol.endpoint import (
    Call,
    Endpoint,
    KeepAlive,
    LegacyEndpoint,
    ListenEnd,
    ListenEvent,
    StdioSession,
    authenticator_for,
)
from ..protocol.envelope import Rejection, Request
from ..protocol.inbound import Cancel, Inbound
from ..protocol.jsonrpc import RequestId, as_request_id, cancelled
from ..protocol.legacy import stdio_era
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

    __slots__ = ("_cancel", "_done", "_ended", "_out", "_task", "_waiter", "outbox")

    status = 200
    session_id = None

    def __init__(self) -> None:
        self.outbox = BoundedOutbox(wake=self._wake)
        self._out: collections.deque[Message] = collections.deque()  # listen events, then the reply
        self._task: asyncio.Task[None] | None = None
        self._cancel: Callable[[], None] | None = None  # 2025 session: tell it the request was given up
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
        if self._cancel is not None and not self._ended:
            self._cancel()
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
        self, endpoint: Endpoint, *, principal: Principal | None = None, headers: Mapping[str, str] | None = None,
        legacy: LegacyEndpoint | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.legacy = legacy
        self._session: StdioSession | None = None  # the 2025 session, once `initialize` opened it
        self._by_id: dict[RequestId, MemoryExchange] = {}  # 2025 exchanges waiting for their response
        self._by_token: dict[RequestId, MemoryExchange] = {}
        self._unsolicited: Unsolicited | None = None
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
        # modern: every message belongs to the exchange of the request it answers; 2025: server->client
        # requests and list changes arrive outside any exchange
        self._unsolicited = on_unsolicited

    async def exchange(
        self, message: Message, headers: Mapping[str, str] | None = None, *, timeout: float | None = -1.0
    ) -> MemoryExchange:
        await self.start()
        if self.legacy is not None and (self._session is not None or stdio_era(message) == "legacy"):
            return self._legacy_exchange(message)
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

    # -- the 2025 era ------------------------------------------------------------------------------
    def _legacy_exchange(self, message: Message) -> MemoryExchange:
        session = self._session
        if session is None:
            assert self.legacy is not None and self._principal is not None
            session = self._session = self.legacy.stdio_session(self._principal, self._route)
        ex = MemoryExchange()
        rid = as_request_id(message.get("id"))
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = as_request_id(meta.get("progressToken")) if isinstance(meta, dict) else None
        if rid is None:
            ex.end()  # not a request: whatever the session answers goes to `watch`
        else:
            self._by_id[rid] = ex
            if token is not None:
                self._by_token[token] = ex
            ex._cancel = lambda: self._give_up(rid, token, ex)
        session.receive(message)
        return ex

    def _give_up(self, rid: RequestId, token: RequestId | None, ex: MemoryExchange) -> None:
        self._forget(rid, token, ex)
        if self._session is not None:
            self._session.receive(cancelled(rid, "client closed the request"))

    def _forget(self, rid: RequestId, token: RequestId | None, ex: MemoryExchange) -> None:
        if self._by_id.get(rid) is ex:
            del self._by_id[rid]
        if token is not None and self._by_token.get(token) is ex:
            del self._by_token[token]

    def _route(self, message: Message) -> None:
        """What the 2025 session writes, routed as a stdio client routes lines."""
        if "method" not in message:
            rid = as_request_id(message.get("id"))
            ex = None if rid is None else self._by_id.pop(rid, None)
            if ex is not None:
                for token, waiting in list(self._by_token.items()):
                    if waiting is ex:
                        del self._by_token[token]
                ex.put(message)
                ex.end()
                return
        elif "id" not in message and message.get("method") == "notifications/progress":
            params = message.get("params")
            tok = as_request_id(params.get("progressToken")) if isinstance(params, dict) else None
            ex = None if tok is None else self._by_token.get(tok)
            if ex is not None:
                ex.put(message)
                return
        if self._unsolicited is not None:
            self._unsolicited(message)

    async def send(self, message: Message, headers: Mapping[str, str] | None = None) -> int:
        """`notifications/cancelled` stops the request it names, as on stdio (by the one id rule: `true`
        or `1.0` names nothing); other notifications have no effect on an endpoint (the seam carries
        requests). A malformed one is refused as a transport would. In a 2025 session everything goes to
        the session (answers to server->client requests included)."""
        if self._session is not None:
            self._session.receive(message)
            return 202
        decision = self._core().receive(message)
        if isinstance(decision, Cancel) and decision.entry is not None:
            await decision.entry.aclose()  # the handler is cancelled; its exchange ends without a response
        return decision.status if isinstance(decision, Rejection) else 202

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.aclose()
        if self._started:
            self._started = False
            await self.endpoint.aclose()


__all__ = ["MemoryChannel", "MemoryExchange"]
