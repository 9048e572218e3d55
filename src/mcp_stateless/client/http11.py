"""A lean HTTP/1.1 client on asyncio streams: keep-alive pool, Content-Length and chunked bodies.

Only what an MCP client needs: one request at a time per connection, request bodies sent whole, response bodies
read whole or streamed (SSE). A response whose body is not read to the end (a closed SSE stream) closes its
connection: on HTTP that *is* the cancellation of the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .errors import ChannelError


class HttpError(ChannelError):
    """The HTTP exchange itself failed (connection refused, reset, malformed response, timeout)."""


class ConnectionLost(HttpError):
    """The connection closed before (or while) the response arrived."""


class BodyTooLarge(HttpError):
    """A response body went past the limit its reader set: the rest was never read."""


_PIECE = 65536  # the most of a body read at once


async def bounded(chunks: AsyncIterator[bytes], limit: int, refusal: str) -> AsyncIterator[bytes]:
    """`chunks` until more than `limit` bytes have passed, then `BodyTooLarge(refusal)`: the one capped reader
    for bodies a peer may make endless (metadata documents, an audited server's answers)."""
    seen = 0
    async for chunk in chunks:
        seen += len(chunk)
        if seen > limit:
            raise BodyTooLarge(refusal)
        yield chunk


async def _pieces(reader: asyncio.StreamReader, size: int, what: str) -> AsyncIterator[bytes]:
    """Exactly `size` bytes of `reader`, at most _PIECE at a time; ConnectionLost when it ends before."""
    while size > 0:
        data = await reader.read(min(size, _PIECE))
        if not data:
            raise ConnectionLost(f"connection closed in the middle of {what}")
        size -= len(data)
        yield data


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


class _Conn:
    __slots__ = ("key", "reader", "reused", "writer")

    def __init__(
        self, key: tuple[str, str, int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.key = key
        self.reader = reader
        self.writer = writer
        self.reused = False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


@dataclass(slots=True)
class Response:
    status: int
    reason: str
    headers: dict[str, str]
    _conn: _Conn | None
    _pool: Pool
    _length: int | None
    _chunked: bool
    _keep_alive: bool
    _done: bool = False
    _buffered: bytes | None = field(default=None)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    async def read(self) -> bytes:
        if self._buffered is not None:
            return self._buffered
        parts = [chunk async for chunk in self.iter_bytes()]
        self._buffered = b"".join(parts)
        return self._buffered

    async def iter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives; the connection returns to the pool once the body is complete."""
        conn = self._conn
        if conn is None or self._done:
            return
        reader = conn.reader
        try:
            if self._chunked:
                while True:
                    line = await reader.readuntil(b"\r\n")
                    size = int(line.split(b";", 1)[0].strip(), 16)
                    if size < 0:
                        raise ValueError(f"negative chunk size {size}")
                    if size == 0:
                        while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                            pass
                        break
                    # In pieces, like a Content-Length body: a chunk may declare any size, and a reader that
                    # caps the body must see its bytes before they are all in memory.
                    async for data in _pieces(reader, size, "a chunk"):
                        yield data
                    if await reader.readexactly(2) != b"\r\n":
                        raise ValueError("no CRLF after a chunk")
            elif self._length is not None:
                async for data in _pieces(reader, self._length, "the response body"):
                    yield data
            else:
                self._keep_alive = False
                while True:
                    data = await reader.read(_PIECE)
                    if not data:
                        break
                    yield data
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            self._discard()
            raise ConnectionLost(f"connection lost while reading the response body: {e}") from None
        except ValueError as e:
            self._discard()
            raise HttpError(f"malformed chunked body: {e}") from None
        except BaseException:
            self._discard()
            raise
        self._done = True
        self._conn = None
        if self._keep_alive:
            self._pool.release(conn)
        else:
            conn.close()

    def _discard(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._done = True

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
        self._closed = False

    async def _connect(self, ep: HttpUrl) -> _Conn:
        ctx: ssl.SSLContext | None = None
        if ep.scheme == "https":
            ctx = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    ep.host, ep.port, ssl=ctx, server_hostname=ep.host if ctx else None, limit=1 << 22
                )
        except TimeoutError:
            raise HttpError(f"timed out connecting to {ep.host}:{ep.port}") from None
        except OSError as e:
            raise HttpError(f"cannot connect to {ep.host}:{ep.port}: {e.strerror or e}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            import socket

            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Conn(ep.key, reader, writer)

    def release(self, conn: _Conn) -> None:
        if self._closed or conn.reader.at_eof():
            conn.close()
            return
        idle = self._idle.setdefault(conn.key, [])
        if len(idle) >= self.max_idle:
            conn.close()
            return
        conn.reused = True
        idle.append(conn)

    def _acquire_idle(self, key: tuple[str, str, int]) -> _Conn | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.reader.at_eof() or conn.writer.is_closing():
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
            conn = self._acquire_idle(ep.key) if attempt == 0 else None
            if conn is None:
                conn = await self._connect(ep)
            try:
                conn.writer.write(data)
                if timeout is None:
                    return await self._read_head(conn, method)
                async with asyncio.timeout(timeout):
                    return await self._read_head(conn, method)
            except _StaleConnection:
                conn.close()
                if not conn.reused:
                    raise ConnectionLost("the server closed the connection without a response") from None
                continue  # a keep-alive connection the server had already closed: one fresh try
            except TimeoutError:
                conn.close()
                raise HttpError(f"no response from {ep.host}:{ep.port} within {timeout} s") from None
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
                conn.close()
                raise ConnectionLost(f"connection to {ep.host}:{ep.port} failed: {e}") from None
            except BaseException:
                conn.close()
                raise
        raise ConnectionLost("the server closed the connection without a response")  # pragma: no cover

    async def _read_head(self, conn: _Conn, method: str) -> Response:
        try:
            raw = await conn.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if not e.partial:
                raise _StaleConnection from None
            raise
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise HttpError(f"malformed HTTP status line: {lines[0][:80]!r}")
        status = int(parts[1])
        reason = parts[2] if len(parts) > 2 else ""
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            k, _, v = line.partition(":")
            k = k.strip().lower()
            v = v.strip()
            headers[k] = f"{headers[k]}, {v}" if k in headers else v
        if status < 200 and status != 101:
            return await self._read_head(conn, method)  # 1xx informational: skip
        keep_alive = parts[0] != "HTTP/1.0" and "close" not in headers.get("connection", "").lower()
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length: int | None = None
        if not chunked and "content-length" in headers:
            length = int(headers["content-length"])
        if method == "HEAD" or status in (204, 304):
            length = 0
        resp = Response(status, reason, headers, conn, self, length, chunked, keep_alive)
        if length == 0:
            resp._buffered = b""
            resp._done = True
            resp._conn = None
            if keep_alive:
                self.release(conn)
            else:
                conn.close()
        return resp

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()


class _StaleConnection(ConnectionLost):
    """A reused keep-alive connection the server had closed: retried once on a fresh one, never raised."""


__all__ = ["BodyTooLarge", "ConnectionLost", "HttpError", "HttpUrl", "Pool", "Response", "bounded"]
