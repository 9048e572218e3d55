"""Streamable HTTP: one POST per exchange (JSON or an SSE stream back), redirects within the origin, auth."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncIterator, Mapping

import orjson

from ...protocol import jsonrpc
from ...protocol.sse import SSEParser, decode_messages
from ..auth import Auth, HttpRequest, send
from ..errors import AuthenticationError, ChannelError, HttpStatusError, ServerLost, StreamBroken
from ..http11 import ConnectionLost, HttpError, HttpUrl, Pool, Response
from .base import Message, Restarted, Unsolicited, log

# Closing a stream after its answer: how long its end may take to come. A server ends the stream right after
# the response (the spec's SHOULD; the TS SDK writes the end a moment after the event), so reading to the end
# puts the connection back in the pool, where closing it mid-body would cost a new TCP connection per call. The
# rest is read in the background (http11's `finish_in_background`); on a loaded machine the end can take tens
# of milliseconds to arrive.
_DRAIN_WITHIN = 0.1


class HttpExchange:
    """`last_event_id` and `retry_ms` are what an SSE response said about resuming it (legacy streams).
    Iterating it gives the response's messages; a plain class, not a generator, because it is on every
    request's path and a generator left suspended after the answer costs a finalizer task each."""

    __slots__ = ("_answered", "_closed", "_pending", "_resp", "_sse", "_started", "headers", "last_event_id",
                 "retry_ms", "session_id", "status")

    def __init__(self, resp: Response) -> None:
        self._resp = resp
        self.status = resp.status
        self.headers = resp.headers
        self.session_id = resp.headers.get("mcp-session-id")
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None
        self._answered = False
        self._started = False
        self._closed = False
        self._sse: SSEParser | None = None
        self._pending: deque[Message] = deque()

    def __aiter__(self) -> AsyncIterator[Message]:
        return self

    async def __anext__(self) -> Message:
        pending = self._pending
        while not pending:
            if self._closed:
                raise StopAsyncIteration
            try:
                await self._more()
            except HttpError as e:  # the body broke off (connection reset / closed mid-stream)
                self._closed = True
                raise StreamBroken(f"the response stream broke: {e}") from None
        m = pending.popleft()
        if jsonrpc.is_response(m):
            self._answered = True
        return m

    async def _more(self) -> None:
        """Read until there are messages to give, or the body's end (`_closed`)."""
        resp = self._resp
        if not self._started:
            self._started = True
            if resp.status == 202:
                await resp.read()
                self._closed = True
                return
            if resp.status in (401, 403):  # a refusal before dispatch, whatever the body says
                self._closed = True
                raise AuthenticationError(resp.status, await resp.read(), resp.headers)
            if resp.content_type == "text/event-stream" and resp.status < 300:
                self._sse = SSEParser()
            else:
                self._closed = True
                body = await resp.read()
                ctype = resp.content_type
                if ctype == "application/json" or (ctype == "" and body[:1] in (b"{", b"[")):
                    msgs = decode_messages(body)
                    if msgs and all("jsonrpc" in m for m in msgs):
                        self._pending.extend(msgs)
                        return
                if resp.status >= 300 or body:
                    raise HttpStatusError(resp.status, body, resp.headers)
                return
        parser = self._sse
        assert parser is not None
        piece = await resp.next_piece()
        events = parser.feed(piece) if piece is not None else parser.close()
        if piece is None:
            self._closed = True
        self.last_event_id, self.retry_ms = parser.last_event_id, parser.retry
        for ev in events:
            if ev.event == "message" and ev.data:
                self._pending.extend(decode_messages(ev.data))

    async def aclose(self) -> None:
        """Stop reading. Before the answer this closes the connection (on a modern server, a cancellation);
        after it, the rest of the stream is dropped as it comes, and the connection goes back to the pool
        if the stream ends within _DRAIN_WITHIN (it is closed otherwise). The caller never waits for that."""
        self._closed = True
        self._pending.clear()
        if self._answered:
            self._resp.finish_in_background(_DRAIN_WITHIN)
        else:
            await self._resp.aclose()


# 307/308 keep the method and body (RFC 9110 15.4.8, 15.4.9): a POST may follow them, this many times.
_MAX_REDIRECTS = 3


class HttpChannel:
    """Streamable HTTP: each message is its own POST to one endpoint URL over a keep-alive pool. Every
    request (POST, GET, DELETE) passes `request`, where the `auth` hook signs it."""

    kind = "http"
    mirrors_headers = True

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        pool: Pool | None = None,
        timeout: float | None = 60.0,
        auth: Auth | None = None,
    ) -> None:
        self.url = url
        self.endpoint = HttpUrl.parse(url)
        self.base_headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **(headers or {}),
        }
        self._own_pool = pool is None
        self.pool = pool or Pool()
        self.timeout = timeout
        self.auth = auth

    @property
    def key(self) -> str:
        """The endpoint (scheme, host, port and path)."""
        ep = self.endpoint
        return f"{ep.scheme}://{ep.host_header}{ep.target}"

    async def start(self) -> None:
        return None

    def watch(self, on_unsolicited: Unsolicited | None, on_restart: Restarted | None) -> None:
        return None  # every message arrives on the response stream of the request it belongs to

    async def request(
        self, method: str, endpoint: HttpUrl, headers: dict[str, str], body: bytes = b"", *,
        timeout: float | None = -1.0,
    ) -> Response:
        """The choke point: one HTTP request through the auth hook, transport failures as `ChannelError`."""
        try:
            return await send(self.pool, HttpRequest(method, endpoint, headers, body), self.auth,
                              timeout=self.timeout if timeout == -1.0 else timeout)
        except ConnectionLost as e:
            raise ServerLost(str(e)) from None
        except HttpError as e:
            raise ChannelError(str(e)) from None

    async def exchange(
        self, message: Message, headers: Mapping[str, str] | None = None, *, timeout: float | None = -1.0
    ) -> HttpExchange:
        hdrs = {**self.base_headers, **headers} if headers else dict(self.base_headers)
        body = orjson.dumps(message)
        resp = await self.request("POST", self.endpoint, hdrs, body, timeout=timeout)
        hops = 0
        while resp.status in (307, 308) and hops < _MAX_REDIRECTS:
            target = self._same_origin(resp.headers.get("location"))
            if target is None:
                break
            await resp.read()  # the connection goes back to the pool
            # A mount that redirects /mcp to /mcp/ (Starlette) keeps doing so: ask there from now on.
            log.info("HTTP %d from %s to %s: using that URL", resp.status, self.key, target.target)
            self.endpoint = target
            hops += 1
            resp = await self.request("POST", target, hdrs, body, timeout=timeout)
        return HttpExchange(resp)

    def _same_origin(self, location: str | None) -> HttpUrl | None:
        """Where a 307/308 points, if on this origin (credentials are never replayed to another one)."""
        if not location:
            return None
        try:
            target = self.endpoint.resolve(location)
        except ValueError:
            return None
        return target if target.key == self.endpoint.key else None

    async def send(self, message: Message, headers: Mapping[str, str] | None = None) -> int:
        """POST a notification or response; returns the HTTP status (202 expected)."""
        ex = await self.exchange(message, headers)
        try:
            async for _ in ex:
                pass
        except HttpStatusError:
            pass
        finally:
            await ex.aclose()
        return ex.status

    async def get(self, headers: Mapping[str, str], *, url: str | None = None) -> Response:
        ep = HttpUrl.parse(url) if url else self.endpoint
        hdrs = {k: v for k, v in self.base_headers.items() if k != "Content-Type"}
        hdrs.update(headers)
        return await self.request("GET", ep, hdrs)

    async def delete(self, headers: Mapping[str, str]) -> None:
        with contextlib.suppress(ChannelError):
            resp = await self.request("DELETE", self.endpoint, {**self.base_headers, **headers}, timeout=5.0)
            await resp.read()

    async def aclose(self) -> None:
        if self._own_pool:
            await self.pool.aclose()


# ---------------------------------------------------------------------------------------------- stdio
