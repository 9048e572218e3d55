"""Client-side channels: move JSON-RPC messages to a server and hand back the messages of one exchange.

A channel knows nothing about eras or MRTR. `exchange()` sends one request and returns an `Exchange`, an async
iterator over the messages that belong to it (notifications, then the response); closing an unfinished exchange
cancels the request (HTTP: the connection closes; stdio: `notifications/cancelled`). Messages that belong to no
exchange (legacy server→client requests on stdio, unrouted notifications) go to `on_unsolicited`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

import orjson

from ..protocol import jsonrpc
from ..protocol.meta import META_PROGRESS_TOKEN, META_SUBSCRIPTION_ID
from ..protocol.sse import SSEParser, decode_messages
from .auth import Auth, HttpRequest, send
from .errors import AuthenticationError, ChannelError, HttpStatusError, ServerLost, StreamBroken
from .http11 import ConnectionLost, HttpError, HttpUrl, Pool, Response

log = logging.getLogger("mcp_stateless.client")

Message = dict[str, Any]
Unsolicited = Callable[[Message], None]
Restarted = Callable[[], None]


class Exchange(Protocol):
    """Messages of one request; iterate, then (or instead) `aclose()`. `status`, `headers` and `session_id`
    describe the HTTP response (200 / empty / None off HTTP)."""

    @property
    def status(self) -> int: ...

    @property
    def session_id(self) -> str | None: ...

    def __aiter__(self) -> AsyncIterator[Message]: ...

    async def aclose(self) -> None: ...


class Channel(Protocol):
    """How a session reaches its server: Streamable HTTP, a stdio subprocess, an in-memory endpoint.

    `headers` given to `exchange`/`send` are the HTTP headers mirroring the body; channels without HTTP
    ignore them, and say so with `mirrors_headers = False` (then nothing depends on `x-mcp-header`).
    """

    @property
    def kind(self) -> str: ...

    @property
    def key(self) -> str:
        """What identifies the server (e.g. for an era cache): endpoint URL, command line, object."""
        ...

    @property
    def mirrors_headers(self) -> bool: ...

    async def start(self) -> None:
        """Make the server reachable (spawn / restart a process); idempotent."""
        ...

    def watch(self, on_unsolicited: Unsolicited | None, on_restart: Restarted | None) -> None:
        """Where messages that belong to no exchange go, and whom to tell when the server was restarted."""
        ...

    async def exchange(
        self, message: Message, headers: Mapping[str, str] | None = None, *, timeout: float | None = -1.0
    ) -> Exchange: ...

    async def send(self, message: Message, headers: Mapping[str, str] | None = None) -> int:
        """Deliver a notification or a response; the HTTP status (202 off HTTP)."""
        ...

    async def aclose(self) -> None: ...


# ----------------------------------------------------------------------------------------------- HTTP


class HttpExchange:
    """`last_event_id` and `retry_ms` are what an SSE response said about resuming it (legacy streams)."""

    __slots__ = ("_resp", "headers", "last_event_id", "retry_ms", "session_id", "status")

    def __init__(self, resp: Response) -> None:
        self._resp = resp
        self.status = resp.status
        self.headers = resp.headers
        self.session_id = resp.headers.get("mcp-session-id")
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    async def __aiter__(self) -> AsyncIterator[Message]:
        try:
            async for m in self._messages():
                yield m
        except HttpError as e:  # the body broke off (connection reset / closed mid-stream)
            raise StreamBroken(f"the response stream broke: {e}") from None

    async def _messages(self) -> AsyncIterator[Message]:
        resp = self._resp
        ctype = resp.content_type
        if resp.status == 202:
            await resp.read()
            return
        if resp.status in (401, 403):  # a refusal before dispatch, whatever the body says
            raise AuthenticationError(resp.status, await resp.read(), resp.headers)
        if ctype == "text/event-stream" and resp.status < 300:
            parser = SSEParser()
            async for chunk in resp.iter_bytes():
                for ev in parser.feed(chunk):
                    self.last_event_id, self.retry_ms = parser.last_event_id, parser.retry
                    if ev.event == "message" and ev.data:
                        for m in decode_messages(ev.data):
                            yield m
                self.last_event_id, self.retry_ms = parser.last_event_id, parser.retry
            for ev in parser.close():
                if ev.event == "message" and ev.data:
                    for m in decode_messages(ev.data):
                        yield m
            return
        body = await resp.read()
        if ctype == "application/json" or (ctype == "" and body[:1] in (b"{", b"[")):
            msgs = decode_messages(body)
            if msgs and all("jsonrpc" in m for m in msgs):
                for m in msgs:
                    yield m
                return
        if resp.status >= 300 or body:
            raise HttpStatusError(resp.status, body, resp.headers)

    async def aclose(self) -> None:
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


_END = object()


class StdioExchange:
    __slots__ = ("_chan", "_done", "_queue", "id", "token")

    status = 200
    session_id = None

    def __init__(self, chan: StdioChannel, id_: Any, token: Any) -> None:
        self._chan = chan
        self.id = id_
        self.token = token
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._done = False

    def push(self, item: Any) -> None:
        self._queue.put_nowait(item)

    async def __aiter__(self) -> AsyncIterator[Message]:
        while not self._done:
            item = await self._queue.get()
            if item is _END:
                self._done = True
                raise ServerLost(self._chan.exit_reason())
            if isinstance(item, dict):
                if jsonrpc.is_response(item) and item["id"] == self.id:
                    self._done = True
                yield item

    async def aclose(self) -> None:
        self._chan._forget(self)
        if not self._done:
            self._done = True
            await self._chan.cancel(self.id, "client closed the request")


class StdioChannel:
    """Spawns the server; requests are interleaved on one pipe and demultiplexed by id / token / subscription."""

    kind = "stdio"
    mirrors_headers = False

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        max_restarts: int = 3,
        shutdown_timeout: float = 2.0,
        stderr: int | None = None,
    ) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise ValueError("empty stdio command")
        self.env = {**os.environ, **env} if env else None
        self.cwd = cwd
        self.max_restarts = max_restarts
        self.shutdown_timeout = shutdown_timeout
        self.stderr = stderr
        self.proc: asyncio.subprocess.Process | None = None
        self.restarts = 0
        self.on_unsolicited: Unsolicited | None = None
        self.on_restart: Restarted | None = None
        self._by_id: dict[Any, StdioExchange] = {}
        self._by_token: dict[Any, StdioExchange] = {}
        self._reader: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._returncode: int | None = None

    @property
    def key(self) -> str:
        return "stdio:" + shlex.join(self.argv)

    def watch(self, on_unsolicited: Unsolicited | None, on_restart: Restarted | None) -> None:
        self.on_unsolicited = on_unsolicited
        self.on_restart = on_restart

    def exit_reason(self) -> str:
        rc = self._returncode
        return f"the server process exited (status {rc})" if rc is not None else "the server process went away"

    async def start(self) -> None:
        async with self._lock:
            await self._start_locked()

    async def _start_locked(self) -> None:
        if self._closed:
            raise ChannelError("channel is closed")
        if self.proc is not None and self.proc.returncode is None and self._reader and not self._reader.done():
            return
        if self.proc is not None:
            if self.restarts >= self.max_restarts:
                raise ServerLost(f"{self.exit_reason()}; not restarting again ({self.restarts} restarts)")
            self.restarts += 1
            log.warning("stdio server exited; restarting %s (restart %d)", self.argv[0], self.restarts)
            if self.on_restart is not None:
                self.on_restart()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=self.stderr,
                env=self.env,
                cwd=self.cwd,
                limit=64 * 1024 * 1024,
            )
        except OSError as e:
            raise ChannelError(f"cannot start {self.argv[0]!r}: {e.strerror or e}") from None
        self._returncode = None
        self._reader = asyncio.get_running_loop().create_task(self._read(self.proc))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        try:
            while True:
                line = await proc.stdout.readline()
                if not line:
                    break
                line = line.strip()
                if not line:
                    continue
                try:
                    msg = orjson.loads(line)
                except orjson.JSONDecodeError:
                    log.warning("stdio server wrote a line that is not JSON: %r", line[:200])
                    continue
                if isinstance(msg, dict):
                    self._route(msg)
        except (ConnectionError, ValueError) as e:
            log.warning("stdio read failed: %s", e)
        finally:
            with contextlib.suppress(Exception):
                self._returncode = await asyncio.wait_for(proc.wait(), 1.0)
            lost = list(self._by_id.values())
            self._by_id.clear()
            self._by_token.clear()
            for ex in lost:
                ex.push(_END)

    def _route(self, msg: Message) -> None:
        if jsonrpc.is_response(msg):
            ex = self._by_id.get(_k(msg["id"]))
            if ex is not None:
                ex.push(msg)
                return
        elif "id" not in msg:
            params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
            tok = params.get("progressToken") if params else None
            if tok is not None and (ex := self._by_token.get(_k(tok))) is not None:
                ex.push(msg)
                return
            meta = params.get("_meta") if params else None
            if isinstance(meta, dict) and META_SUBSCRIPTION_ID in meta:
                ex = self._by_id.get(_k(meta[META_SUBSCRIPTION_ID]))
                if ex is not None:
                    ex.push(msg)
                    return
            if msg.get("method") == "notifications/cancelled" and params and "requestId" in params:
                ex = self._by_id.get(_k(params["requestId"]))
                if ex is not None:
                    ex.push(msg)
                    return
        if self.on_unsolicited is not None:
            self.on_unsolicited(msg)
        else:
            log.debug("unrouted message from stdio server: %s", msg.get("method") or msg.get("id"))

    def _write(self, message: Message) -> None:
        proc = self.proc
        if proc is None or proc.stdin is None or proc.returncode is not None or proc.stdin.is_closing():
            raise ServerLost(self.exit_reason())
        proc.stdin.write(orjson.dumps(message) + b"\n")

    async def exchange(
        self, message: Message, headers: Mapping[str, str] | None = None, *, timeout: float | None = None
    ) -> StdioExchange:
        if self.proc is None or self.proc.returncode is not None or (self._reader and self._reader.done()):
            await self.start()
        params = message.get("params") or {}
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = meta.get(META_PROGRESS_TOKEN) if isinstance(meta, dict) else None
        ex = StdioExchange(self, message["id"], token)
        self._by_id[_k(ex.id)] = ex
        if token is not None:
            self._by_token[_k(token)] = ex
        try:
            self._write(message)
        except ServerLost:
            self._forget(ex)
            raise
        return ex

    async def send(self, message: Message, headers: Mapping[str, str] | None = None) -> int:
        if self.proc is None or self.proc.returncode is not None:
            await self.start()
        self._write(message)
        return 202

    def _forget(self, ex: StdioExchange) -> None:
        if self._by_id.get(_k(ex.id)) is ex:
            del self._by_id[_k(ex.id)]
        if ex.token is not None and self._by_token.get(_k(ex.token)) is ex:
            del self._by_token[_k(ex.token)]

    async def cancel(self, request_id: Any, reason: str) -> None:
        with contextlib.suppress(ServerLost):
            self._write(jsonrpc.cancelled(request_id, reason))

    async def aclose(self) -> None:
        """Close stdin, wait, then SIGTERM, then SIGKILL (the stdio transport's shutdown order)."""
        self._closed = True
        proc = self.proc
        if proc is None:
            return
        if proc.returncode is None:
            if proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None and proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(sig)
                try:
                    await asyncio.wait_for(proc.wait(), self.shutdown_timeout)
                    break
                except TimeoutError:
                    continue
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._reader, 1.0)


def _k(v: Any) -> Any:
    """Dict key for an id: keeps 1 and "1" apart (and True apart from 1)."""
    return (type(v).__name__, v) if isinstance(v, bool) else v


__all__ = [
    "Channel",
    "ChannelError",
    "Exchange",
    "HttpChannel",
    "HttpExchange",
    "HttpStatusError",
    "ServerLost",
    "StdioChannel",
    "StdioExchange",
]
