"""The auditor's own non-sticky balancer for `--launch`: an HTTP/1.1 reverse proxy on a free loopback port
that gives each request to the next instance in turn, whatever connection it arrived on.

It is a balancer a server must survive, so it behaves like one (nginx with `proxy_buffering off`): every
end-to-end header passes through unchanged (Mcp-Session-Id, Last-Event-ID, Authorization, the MCP routing
headers); a response body is relayed as it arrives, so an SSE event reaches the client the moment the
instance sends it; a client that hangs up takes its upstream connection with it, so a dropped stream is
still a dropped stream for the instance; an instance that cannot be reached is a 502 naming it.

Which instance served a request is recorded under the value of the request's `X-Mcp-Audit-Tag` header
(the header itself is not forwarded) and also sent back as `X-Mcp-Audit-Instance` (0-based), so the
auditor knows which one to restart even for a request it dropped before any answer came.

Bounded: concurrent client connections, request head size and header count, request body size, and the
time allowed for each phase (idle keep-alive, request body, connecting, the response head, each read of a
response body, each write of it to the client). Request framing is strict (one of Content-Length or chunked,
no bare CR or LF in the head), because the proxy re-frames every request for the instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

TAG = "x-mcp-audit-tag"
INSTANCE = "x-mcp-audit-instance"
# Connection-scoped headers (RFC 9110 §7.6.1): each hop sets its own.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
                        "upgrade", "content-length", "expect"})
# RFC 9110 §5.6.2: a method and a header name are tokens; anything else in them is how a header is smuggled.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_DIGITS = re.compile(r"[0-9]+")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")


@dataclass(frozen=True)
class Limits:
    connections: int = 64
    head_bytes: int = 64 * 1024
    headers: int = 200
    body_bytes: int = 32 * 1024 * 1024
    idle: float = 60.0  # waiting for the next request on a kept-alive client connection
    body: float = 30.0  # reading a request body
    connect: float = 5.0
    response_head: float = 120.0  # a JSON (non-SSE) response is only sent once the call is done
    read: float = 300.0  # between two reads of a response body (a quiet listen stream)
    write: float = 30.0  # for a client to take a piece of a response body (one that stops reading lets go)
    served: int = 10_000  # tags remembered


class _BadRequest(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


class _Inbound:
    """A client connection's bytes: requests are parsed from `buf`, and bytes that arrive while a
    response is relayed (a pipelined request) are kept there rather than lost."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.buf = bytearray()

    async def _more(self) -> bool:
        try:
            data = await self.reader.read(65536)
        except ConnectionError:
            data = b""
        self.buf += data
        return bool(data)

    async def until(self, sep: bytes, limit: int) -> bytes | None:
        """Bytes up to and including `sep`; None when the client closed first."""
        while (i := self.buf.find(sep, 0, limit + len(sep))) < 0:
            if len(self.buf) >= limit + len(sep):
                raise _BadRequest(431, "request head too large")
            if not await self._more():
                return None
        out = bytes(self.buf[: i + len(sep)])
        del self.buf[: i + len(sep)]
        return out

    async def exactly(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            if not await self._more():
                return None
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    async def hung_up(self, limit: int) -> None:
        """Returns when the client closes its connection. Once more than `limit` pipelined bytes wait, it
        stops reading (TCP holds the rest back) and waits for the response in flight to end instead: a
        large pipelined request is not a hang-up."""
        while len(self.buf) <= limit:
            if not await self._more():
                return
        await asyncio.Event().wait()  # only cancelled, once the relay is done


@dataclass
class _Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes

    def get(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name), None)

    def all(self, name: str) -> list[str]:
        """Every comma-separated element of every `name` field (RFC 9110 §5.3)."""
        return [t.strip(" \t") for k, v in self.headers if k.lower() == name for t in v.split(",")]

    @property
    def keep_alive(self) -> bool:
        conn = (self.get("connection") or "").lower()
        return "close" not in conn if self.version == "HTTP/1.1" else "keep-alive" in conn


def _parse_head(raw: bytes, limits: Limits) -> tuple[str, str, str, list[tuple[str, str]]]:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    # A CR, LF or NUL left after splitting on CRLF would end a line at the instance (RFC 9112 §2.2): refused.
    if len(parts) != 3 or parts[2] not in ("HTTP/1.0", "HTTP/1.1") or not _TOKEN.fullmatch(parts[0]) \
            or any(c in lines[0] for c in "\r\n\0\t"):
        raise _BadRequest(400, f"malformed request line {lines[0][:80]!r}")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name) or any(c in value for c in "\r\n\0"):
            raise _BadRequest(400, f"malformed header line {line[:80]!r}")
        headers.append((name, value.strip(" \t")))
    if len(headers) > limits.headers:
        raise _BadRequest(431, f"more than {limits.headers} headers")
    return parts[0], parts[1], parts[2], headers


def _response(status: int, reason: str, body: str, extra: Sequence[tuple[str, str]] = ()) -> bytes:
    data = body.encode()
    head = [f"HTTP/1.1 {status} {reason}", "content-type: text/plain; charset=utf-8",
            f"content-length: {len(data)}", *(f"{k}: {v}" for k, v in extra)]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data


class RoundRobinProxy:
    """`upstreams` are (host, port) of the instances; `port` is known once `start` returned."""

    def __init__(self, upstreams: Sequence[tuple[str, int]], limits: Limits | None = None) -> None:
        if not upstreams:
            raise ValueError("a proxy needs at least one upstream")
        self.upstreams = list(upstreams)
        self.limits = limits or Limits()
        self.served: OrderedDict[str, int] = OrderedDict()
        self.port = 0
        self._next = 0
        self._server: asyncio.Server | None = None
        self._slots = asyncio.Semaphore(self.limits.connections)
        self._handlers: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, limit=self.limits.head_bytes)
        self.port = self._server.sockets[0].getsockname()[1]

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def instance_for(self, tag: str) -> int | None:
        return self.served.get(tag)

    def _pick(self, tag: str | None) -> int:
        i = self._next % len(self.upstreams)
        self._next += 1
        if tag is not None:
            self.served[tag] = i
            while len(self.served) > self.limits.served:
                self.served.popitem(last=False)
        return i

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            if self._slots.locked():
                writer.write(_response(503, "Service Unavailable",
                                       f"audit proxy: more than {self.limits.connections} connections\n",
                                       [("connection", "close")]))
                with contextlib.suppress(ConnectionError):
                    await writer.drain()
                return
            async with self._slots:
                await self._serve(_Inbound(reader), writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away: nothing to answer
        except asyncio.CancelledError:
            pass  # aclose ends the connection; nothing awaits this task but the server's callback
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _read_request(self, inbound: _Inbound, writer: asyncio.StreamWriter) -> _Request | None:
        lim = self.limits
        try:
            async with asyncio.timeout(lim.idle):
                raw = await inbound.until(b"\r\n\r\n", lim.head_bytes)
        except TimeoutError:
            return None
        if raw is None:
            return None
        method, target, version, headers = _parse_head(raw, lim)
        req = _Request(method, target, version, headers, b"")
        # RFC 9112 §6.1, §6.3: one unambiguous framing or none; the proxy re-frames with its own
        # Content-Length, so whatever it reads here is what the instance gets, and nothing else.
        te, cl = req.all("transfer-encoding"), req.all("content-length")
        if te and cl:
            raise _BadRequest(400, "both Transfer-Encoding and Content-Length")
        if te and [t.lower() for t in te] != ["chunked"]:
            raise _BadRequest(501, f"unsupported Transfer-Encoding {', '.join(te)[:80]!r}")
        if cl and (len(set(cl)) != 1 or not _DIGITS.fullmatch(cl[0])):
            raise _BadRequest(400, f"malformed Content-Length {', '.join(cl)[:80]!r}")
        if (req.get("expect") or "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        async with asyncio.timeout(lim.body):
            if te:
                parts: list[bytes] = []
                size_total = 0
                while True:
                    line = await inbound.until(b"\r\n", 1024)
                    if line is None:
                        return None
                    digits = line[:-2].split(b";", 1)[0].rstrip(b" \t")
                    if not _HEX.fullmatch(digits):
                        raise _BadRequest(400, "malformed chunk size")
                    size = int(digits, 16)
                    if size == 0:
                        while await inbound.until(b"\r\n", lim.head_bytes) not in (b"\r\n", None):
                            pass  # trailers: not forwarded
                        break
                    size_total += size
                    if size_total > lim.body_bytes:
                        raise _BadRequest(413, f"request body over {lim.body_bytes} bytes")
                    chunk = await inbound.exactly(size + 2)
                    if chunk is None:
                        return None
                    if chunk[-2:] != b"\r\n":
                        raise _BadRequest(400, "a chunk not followed by CRLF")
                    parts.append(chunk[:-2])
                req.body = b"".join(parts)
            else:
                length = int(cl[0]) if cl else 0
                if length > lim.body_bytes:
                    raise _BadRequest(413, f"request body over {lim.body_bytes} bytes")
                body = await inbound.exactly(length)
                if body is None:
                    return None
                req.body = body
        return req

    async def _serve(self, inbound: _Inbound, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                req = await self._read_request(inbound, writer)
            except _BadRequest as e:
                writer.write(_response(e.status, e.reason, f"audit proxy: {e.reason}\n", [("connection", "close")]))
                await writer.drain()
                return
            except TimeoutError:
                writer.write(_response(408, "Request Timeout", "audit proxy: the request body did not arrive\n",
                                       [("connection", "close")]))
                await writer.drain()
                return
            if req is None:
                return
            i = self._pick(req.get(TAG))
            loop = asyncio.get_running_loop()
            relay = loop.create_task(self._relay(req, i, writer))
            gone = loop.create_task(inbound.hung_up(self.limits.head_bytes))
            try:
                await asyncio.wait({relay, gone}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (gone, relay):
                    task.cancel()  # once the client hung up, its upstream connection goes too
                await asyncio.gather(gone, relay, return_exceptions=True)
            keep = relay.done() and not relay.cancelled() and relay.exception() is None and relay.result()
            if not keep or not req.keep_alive:
                return

    async def _relay(self, req: _Request, i: int, writer: asyncio.StreamWriter) -> bool:
        """Forward `req` to upstream `i` and its response back; True when the client connection can be
        reused afterwards."""
        lim = self.limits
        host, port = self.upstreams[i]
        mark = [(INSTANCE, str(i))]
        who = f"instance {i + 1} ({host}:{port})"
        try:
            async with asyncio.timeout(lim.connect):
                up_r, up_w = await asyncio.open_connection(host, port, limit=lim.head_bytes)
        except (OSError, TimeoutError) as e:
            why = "timed out" if isinstance(e, TimeoutError) else (os.strerror(e.errno) if e.errno else str(e))
            writer.write(_response(502, "Bad Gateway", f"audit proxy: {who} is unreachable: {why}\n", mark))
            await writer.drain()
            return True
        try:
            drop = {t.strip().lower() for k, v in req.headers if k.lower() == "connection" for t in v.split(",")}
            head = [f"{req.method} {req.target} HTTP/1.1", f"Host: {host}:{port}"]
            head += [f"{k}: {v}" for k, v in req.headers
                     if k.lower() not in HOP_BY_HOP | drop | {"host", TAG}]
            if req.body or req.method in ("POST", "PUT", "PATCH"):
                head.append(f"Content-Length: {len(req.body)}")
            head.append("Connection: close")
            up_w.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + req.body)
            await up_w.drain()
            try:
                async with asyncio.timeout(lim.response_head):
                    while True:
                        raw = await up_r.readuntil(b"\r\n\r\n")
                        status_line, _, rest = raw.decode("latin-1").partition("\r\n")
                        parts = status_line.split(" ", 2)
                        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
                            raise ValueError(f"malformed status line {status_line[:80]!r}")
                        if not 100 <= int(parts[1]) < 200:
                            break  # 1xx: the proxy already said 100 Continue itself
                    headers = [(k, v.strip()) for k, _, v in (x.partition(":") for x in rest.split("\r\n") if x)]
                    get = {k.lower(): v for k, v in headers}
                    chunked = "chunked" in get.get("transfer-encoding", "").lower()
                    length = None if chunked or "content-length" not in get else int(get["content-length"])
                    if length is not None and length < 0:
                        raise ValueError(f"Content-Length {length}")
            except TimeoutError:
                writer.write(_response(504, "Gateway Timeout",
                                       f"audit proxy: {who} sent no response within {lim.response_head:g} s\n", mark))
                await writer.drain()
                return True
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
                why = str(e) or "it closed the connection without a response"
                writer.write(_response(502, "Bad Gateway", f"audit proxy: {who} gave no valid response: {why}\n",
                                       mark))
                await writer.drain()
                return True
            status = int(parts[1])
            if req.method == "HEAD" or status in (204, 304):
                length, chunked = 0, False
            conn_drop = {t.strip().lower() for t in get.get("connection", "").split(",")}
            out = [status_line]
            out += [f"{k}: {v}" for k, v in headers if k.lower() not in HOP_BY_HOP | conn_drop | {INSTANCE}]
            out.append(f"{INSTANCE}: {i}")
            # A body without Content-Length goes to the client chunked, piece by piece as it arrives.
            out.append(f"content-length: {length}" if length is not None else "transfer-encoding: chunked")
            writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
            await writer.drain()
            return await self._body(up_r, writer, length, chunked)
        finally:
            up_w.close()

    async def _body(self, up: asyncio.StreamReader, writer: asyncio.StreamWriter, length: int | None,
                    chunked: bool) -> bool:
        read = self.limits.read

        async def piece(n: int) -> bytes:
            async with asyncio.timeout(read):
                return await up.read(n)

        async def send(data: bytes) -> None:
            writer.write(data)
            async with asyncio.timeout(self.limits.write):
                await writer.drain()

        try:
            if length is not None:
                left = length
                while left > 0:
                    data = await piece(min(left, 65536))
                    if not data:
                        return False  # the instance died mid-body: the client sees a short body and a close
                    left -= len(data)
                    await send(data)
                return True
            while True:
                if chunked:
                    async with asyncio.timeout(read):
                        line = await up.readuntil(b"\r\n")
                    left = int(line.split(b";", 1)[0].strip(), 16)
                    if left == 0:
                        break
                else:
                    left = -1  # close-delimited: everything until the instance closes
                while left != 0:
                    data = await piece(65536 if left < 0 else min(left, 65536))
                    if not data:
                        if left < 0:
                            break
                        return False
                    if left > 0:
                        left -= len(data)
                    await send(b"%x\r\n%s\r\n" % (len(data), data))
                if not chunked:
                    break
                async with asyncio.timeout(read):
                    await up.readexactly(2)  # the CRLF after a chunk
            await send(b"0\r\n\r\n")
            return True
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return False

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
            self._server = None


__all__ = ["INSTANCE", "TAG", "Limits", "RoundRobinProxy"]
