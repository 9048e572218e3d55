"""A lean HTTP/1.1 client on asyncio protocols: keep-alive pool, Content-Length and chunked bodies.

Only what an MCP client needs: one request at a time per connection, request bodies sent whole, response bodies
read whole or streamed (SSE). A connection is a protocol whose callbacks feed the sans-IO framing
(http11_framing.py) as bytes arrive, so a response that arrived whole is read without waiting again, and one
that is read in pieces wakes its reader once per arrival, not once per chunk. A response whose body is not read
to the end (a closed SSE stream) closes its connection: on HTTP that *is* the cancellation of the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

from .errors import ChannelError
from .http11_framing import HEAD_MAX, BodyDecoder, FramingError, Head, parse_head


class HttpError(ChannelError):
    """The HTTP exchange itself failed (connection refused, reset, malformed response, timeout)."""


class ConnectionLost(HttpError):
    """The connection closed before (or while) the response arrived."""


class BodyTooLarge(HttpError):
    """A response body went past the limit its reader set: the rest was never read."""


_PIECE = 65536  # the most of a body handed to a reader at once
# Reading pauses while this much decoded body waits for its reader, and resumes below _LOW: a body nobody
# reads fast enough (an endless stream, a 200 MiB chunk) stays bounded in memory.
_HIGH = 4 * _PIECE
_LOW = _PIECE


async def bounded(chunks: AsyncIterator[bytes], limit: int, refusal: str) -> AsyncIterator[bytes]:
    """`chunks` until more than `limit` bytes have passed, then `BodyTooLarge(refusal)`: the one capped reader
    for bodies a peer may make endless (metadata documents, an audited server's answers)."""
    seen = 0
    async for chunk in chunks:
        seen += len(chunk)
        if seen > limit:
            raise BodyTooLarge(refusal)
        yield chunk


@dataclass(frozen=True, slots=True)
class HttpUrl:
    """An http(s) URL split the way a request needs it: where to connect, and the request target."""

    scheme: str
    host: str
    port: int
    target: str  # path + query

    @classmethod
    def parse(cls, url: str) -> HttpUrl:
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        port = u.port or (443 if u.scheme == "https" else 80)
        target = (u.path or "/") + (f"?{u.query}" if u.query else "")
        return cls(u.scheme, u.hostname, port, target)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    def resolve(self, ref: str) -> HttpUrl:
        """An absolute or relative reference (the HTTP+SSE `endpoint` event) against this endpoint."""
        if "://" in ref:
            return HttpUrl.parse(ref)
        if ref.startswith("/"):
            return HttpUrl(self.scheme, self.host, self.port, ref)
        base = self.target.split("?", 1)[0].rsplit("/", 1)[0]
        return HttpUrl(self.scheme, self.host, self.port, f"{base}/{ref}")


class _Conn(asyncio.Protocol):
    """One connection: its bytes not yet framed (`buf`), the decoded body not yet read (`body`), and at most
    one reader waiting for more. After a response its reader no longer wants, it can `drop` the rest of the
    body as it comes and go back to the pool when that ends."""

    __slots__ = ("_drop_timer", "_dropped", "_dropping", "_loop", "_method", "_timed_out", "_waiter", "body", "buf",
                 "decoder", "error", "key", "lost", "paused", "reused", "transport")

    def __init__(self, key: tuple[str, str, int], loop: asyncio.AbstractEventLoop) -> None:
        self.key = key
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.body = bytearray()
        self.decoder: BodyDecoder | None = None
        self.error: HttpError | None = None
        self.lost = False
        self.paused = False
        self.reused = False
        self._waiter: asyncio.Future[None] | None = None
        self._timed_out = False
        self._dropping: Pool | None = None
        self._dropped = 0
        self._drop_timer: asyncio.TimerHandle | None = None
        self._method = "GET"

    # -- protocol callbacks ------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not its subclasses

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.decoder is not None:
            self._decode()
        self._wake()

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.decoder is not None and not self.decoder.done and self.decoder.eof():
            self._decoded()
        if self._dropping is not None:  # a dropped body that never ended
            self._end_drop(reuse=False)
        self._wake()

    # -- reading ---------------------------------------------------------------------------------------
    def _wake(self) -> None:
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    async def wait(self) -> None:
        """Until more bytes, the end of the connection or a time-out (`_timed_out`)."""
        self._waiter = w = self._loop.create_future()
        await w

    def _time_out(self) -> None:
        self._timed_out = True
        self._wake()

    async def read_head(self, timeout: float | None) -> Head:
        """The next response head (1xx informational heads skipped); its body's decoder is set up."""
        timer = self._loop.call_later(timeout, self._time_out) if timeout is not None else None
        self._timed_out = False
        try:
            while True:
                end = self.buf.find(b"\r\n\r\n")
                if end >= 0:
                    raw = bytes(self.buf[:end + 4])
                    del self.buf[:end + 4]
                    head = parse_head(raw, self._method)
                    if head.status < 200 and head.status != 101:
                        continue
                    self.decoder = BodyDecoder(head.length, head.chunked)
                    self._decode()
                    return head
                if len(self.buf) > HEAD_MAX:
                    raise HttpError("the response head is larger than 64 KiB")
                if self.lost:
                    if not self.buf:
                        raise _StaleConnection
                    raise ConnectionLost("connection closed in the middle of the response head")
                if self._timed_out:
                    raise TimeoutError
                await self.wait()
        finally:
            if timer is not None:
                timer.cancel()

    def _decode(self) -> None:
        decoder = self.decoder
        assert decoder is not None
        try:
            decoder.feed(self.buf, self.body)
        except FramingError as e:
            self.error = HttpError(f"malformed chunked body: {e}")
            self.close()
            return
        if decoder.done:
            self._decoded()
        elif self._dropping is not None:
            self._dropped += len(self.body)
            self.body.clear()
            if self._dropped > _HIGH:  # more than a stream's end: not worth the connection
                self._end_drop(reuse=False)
        elif len(self.body) > _HIGH and not self.paused and self.transport is not None:
            self.transport.pause_reading()
            self.paused = True

    def _decoded(self) -> None:
        if self._dropping is not None:
            self.body.clear()
            self._end_drop(reuse=True)

    def take(self) -> bytes:
        """What has been decoded of the body, at most _PIECE of it."""
        body = self.body
        if len(body) <= _PIECE:
            data = bytes(body)
            body.clear()
        else:
            data = bytes(body[:_PIECE])
            del body[:_PIECE]
        if self.paused and len(body) < _LOW and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data

    # -- after the response ----------------------------------------------------------------------------
    def reusable(self) -> bool:
        return not (self.lost or self.error is not None or self.buf or self.transport is None
                    or self.transport.is_closing())

    def ready(self, method: str) -> None:
        """Before a request: nothing left of the previous response."""
        self.decoder = None
        self.body.clear()
        self._method = method

    def drop(self, pool: Pool, within: float) -> None:
        """The rest of this body is not wanted: drop it as it comes; the connection goes back to `pool` when
        the body ends within `within` seconds, and is closed otherwise."""
        self.body.clear()
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        self._dropping, self._dropped = pool, 0
        self._drop_timer = self._loop.call_later(within, self._end_drop, False)
        pool.finishing(self.key, +1)

    def _end_drop(self, reuse: bool) -> None:
        pool, self._dropping = self._dropping, None
        if pool is None:
            return
        if self._drop_timer is not None:
            self._drop_timer.cancel()
            self._drop_timer = None
        pool.finishing(self.key, -1)
        if reuse:
            pool.release(self)
        else:
            self.close()
            pool.wake(self.key)  # a request waiting for this connection opens its own

    def close(self) -> None:
        if self.transport is not None:
            with contextlib.suppress(Exception):
                self.transport.close()


class Response:
    """A response whose head has arrived; its body is read with `read`, `iter_bytes` or `next_piece`."""

    __slots__ = ("_buffered", "_conn", "_done", "_keep_alive", "_pool", "headers", "reason", "status")

    def __init__(self, head: Head, conn: _Conn | None, pool: Pool) -> None:
        self.status = head.status
        self.reason = head.reason
        self.headers = head.headers
        self._conn = conn
        self._pool = pool
        self._keep_alive = head.keep_alive and not (conn is not None and conn.decoder is not None
                                                     and conn.decoder.until_close)
        self._done = conn is None
        self._buffered: bytes | None = b"" if conn is None else None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    async def read(self) -> bytes:
        if self._buffered is not None:
            return self._buffered
        parts = []
        while (piece := await self.next_piece()) is not None:
            parts.append(piece)
        self._buffered = b"".join(parts)
        return self._buffered

    async def iter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives; the connection returns to the pool once the body is complete."""
        try:
            while (piece := await self.next_piece()) is not None:
                yield piece
        except BaseException:
            self._discard()  # a reader that stops early (or fails) cancels the request
            raise

    async def next_piece(self) -> bytes | None:
        """The next part of the body (at most 64 KiB), or None at its end; the connection returns to the pool
        once the body is complete."""
        conn = self._conn
        if conn is None or self._done:
            return None
        decoder = conn.decoder
        assert decoder is not None
        try:
            while True:
                if conn.body:
                    return conn.take()
                if decoder.done:
                    break
                if conn.error is not None:
                    raise conn.error
                if conn.lost:
                    raise ConnectionLost("connection closed in the middle of the response body")
                await conn.wait()
        except BaseException:
            self._discard()
            raise
        self._done = True
        self._conn = None
        if self._keep_alive:
            self._pool.release(conn)
        else:
            conn.close()
        return None

    def _discard(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._done = True

    def finish_in_background(self, within: float) -> None:
        """The rest of the body is not wanted, the connection is: what is left of the body is dropped as it
        arrives, and the connection goes back to the pool if the body ends within `within` seconds (a stream
        the server ends right after its answer) and closes otherwise. Never waits."""
        conn = self._conn
        if conn is None or self._done:
            return
        self._conn = None
        self._done = True
        assert conn.decoder is not None
        if not self._keep_alive:
            conn.close()
        elif conn.decoder.done:
            conn.body.clear()
            self._pool.release(conn)
        elif conn.lost or conn.error is not None:
            conn.close()
        else:
            conn.drop(self._pool, within)

    async def aclose(self) -> None:
        """Stop reading: an unfinished body closes the connection (cancelling the request server-side)."""
        if not self._done:
            self._discard()


class Pool:
    """Keep-alive connections per (scheme, host, port)."""

    def __init__(
        self,
        *,
        max_idle: int = 64,
        connect_timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.max_idle = max_idle
        self.connect_timeout = connect_timeout
        self._ssl = ssl_context
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        # Connections whose previous response is still ending (its rest dropped, `finish_in_background`), and
        # the requests waiting for one of them rather than opening a connection of their own.
        self._finishing: dict[tuple[str, str, int], int] = {}
        self._waiting: dict[tuple[str, str, int], list[asyncio.Future[None]]] = {}
        self._closed = False

    async def _connect(self, ep: HttpUrl) -> _Conn:
        ctx: ssl.SSLContext | None = None
        if ep.scheme == "https":
            ctx = self._ssl or ssl.create_default_context()
        loop = asyncio.get_running_loop()
        conn = _Conn(ep.key, loop)
        try:
            async with asyncio.timeout(self.connect_timeout):
                transport, _ = await loop.create_connection(
                    lambda: conn, ep.host, ep.port, ssl=ctx, server_hostname=ep.host if ctx else None)
        except TimeoutError:
            raise HttpError(f"timed out connecting to {ep.host}:{ep.port}") from None
        except OSError as e:
            raise HttpError(f"cannot connect to {ep.host}:{ep.port}: {e.strerror or e}") from None
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def release(self, conn: _Conn) -> None:
        if self._closed or not conn.reusable():
            conn.close()
            return
        idle = self._idle.setdefault(conn.key, [])
        if len(idle) >= self.max_idle:
            conn.close()
            return
        conn.reused = True
        idle.append(conn)
        self.wake(conn.key)

    def finishing(self, key: tuple[str, str, int], delta: int) -> None:
        self._finishing[key] = self._finishing.get(key, 0) + delta

    def wake(self, key: tuple[str, str, int]) -> None:
        """One request waiting for a connection of `key` looks again."""
        waiting = self._waiting.get(key)
        while waiting:
            fut = waiting.pop(0)
            if not fut.done():
                fut.set_result(None)
                return

    async def _idle_or_finishing(self, key: tuple[str, str, int]) -> _Conn | None:
        """An idle connection, else one whose previous response is about to end: a caller that makes one
        request after another on a server that ends each stream a moment after its answer keeps using one
        connection instead of opening a second each time. The wait is bounded by the finishing response's own
        (`finish_in_background`), after which a connection that did not end is closed."""
        conn = self._acquire_idle(key)
        while conn is None and self._finishing.get(key):
            fut = asyncio.get_running_loop().create_future()
            waiting = self._waiting.setdefault(key, [])
            waiting.append(fut)
            try:
                await fut
            finally:
                if fut in waiting:
                    waiting.remove(fut)
            conn = self._acquire_idle(key)
        return conn

    def _acquire_idle(self, key: tuple[str, str, int]) -> _Conn | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.reusable():
                conn.close()
                continue
            return conn
        return None

    async def request(
        self,
        method: str,
        ep: HttpUrl,
        headers: Mapping[str, str],
        body: bytes = b"",
        *,
        timeout: float | None = 60.0,
    ) -> Response:
        """Send one request and read the response head; read or stream the body from the Response."""
        head = [f"{method} {ep.target} HTTP/1.1\r\nHost: {ep.host_header}\r\n"]
        for k, v in headers.items():
            head.append(f"{k}: {v}\r\n")
        if body or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body)}\r\n")
        head.append("\r\n")
        data = "".join(head).encode("latin-1") + body
        for attempt in (0, 1):
            conn = await self._idle_or_finishing(ep.key) if attempt == 0 else None
            if conn is None:
                conn = await self._connect(ep)
            try:
                conn.ready(method)
                assert conn.transport is not None
                conn.transport.write(data)
                resp_head = await conn.read_head(timeout)
            except _StaleConnection:
                conn.close()
                if not conn.reused:
                    raise ConnectionLost("the server closed the connection without a response") from None
                continue  # a keep-alive connection the server had already closed: one fresh try
            except TimeoutError:
                conn.close()
                raise HttpError(f"no response from {ep.host}:{ep.port} within {timeout} s") from None
            except FramingError as e:
                conn.close()
                raise HttpError(str(e)) from None
            except ConnectionError as e:
                conn.close()
                raise ConnectionLost(f"connection to {ep.host}:{ep.port} failed: {e}") from None
            except BaseException:
                conn.close()
                raise
            assert conn.decoder is not None
            if conn.decoder.done and not conn.body:  # no body (or an empty one): the connection is free now
                resp = Response(resp_head, None, self)
                if resp_head.keep_alive:
                    self.release(conn)
                else:
                    conn.close()
                return resp
            return Response(resp_head, conn, self)
        raise ConnectionLost("the server closed the connection without a response")  # pragma: no cover

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()


class _StaleConnection(ConnectionLost):
    """A reused keep-alive connection the server had closed: retried once on a fresh one, never raised."""


__all__ = ["BodyTooLarge", "ConnectionLost", "HttpError", "HttpUrl", "Pool", "Response", "bounded"]
