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
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import orjson

from .events import StreamBroken
from .http11 import ConnectionLost, Endpoint, HttpError, Pool, Response
from .sse import SSEParser

log = logging.getLogger("mcp_stateless.client")

Message = dict[str, Any]
Unsolicited = Callable[[Message], None]


class ChannelError(Exception):
    """The channel could not deliver the request or lost it (base class)."""


class HttpStatusError(ChannelError):
    """An HTTP response that carries no JSON-RPC message (e.g. 404 text, 405, 5xx)."""

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        snippet = body[:200].decode("utf-8", "replace")
        super().__init__(f"HTTP {status}" + (f": {snippet}" if snippet else ""))
        self.status = status
        self.body = body
        self.headers = dict(headers)


class ServerLost(ChannelError):
    """The stdio server exited (or the stream broke) while the request was in flight."""


def _is_response(m: Message) -> bool:
    return "id" in m and ("result" in m or "error" in m) and "method" not in m


class Exchange:
    """Messages of one request; iterate, then (or instead) `aclose()`."""

    status: int = 200
    headers: Mapping[str, str] = {}
    session_id: str | None = None

    def __aiter__(self) -> AsyncIterator[Message]:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError


# ----------------------------------------------------------------------------------------------- HTTP


class HttpExchange(Exchange):
    __slots__ = ("_resp", "headers", "session_id", "status")

    def __init__(self, resp: Response) -> None:
        self._resp = resp
        self.status = resp.status
        self.headers = resp.headers
        self.session_id = resp.headers.get("mcp-session-id")

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
        if ctype == "text/event-stream" and resp.status < 300:
            parser = SSEParser()
            async for chunk in resp.iter_bytes():
                for ev in parser.feed(chunk):
                    if ev.event == "message" and ev.data:
                        for m in _decode(ev.data.encode()):
                            yield m
            for ev in parser.close():
                if ev.event == "message" and ev.data:
                    for m in _decode(ev.data.encode()):
                        yield m
            return
        body = await resp.read()
        if ctype == "application/json" or (ctype == "" and body[:1] in (b"{", b"[")):
            try:
                msgs = _decode(body)
            except ValueError:
                msgs = []
            if msgs and all(isinstance(m, dict) and ("jsonrpc" in m) for m in msgs):
                for m in msgs:
                    yield m
                return
        if resp.status >= 300 or body:
            raise HttpStatusError(resp.status, body, resp.headers)

    async def aclose(self) -> None:
        await self._resp.aclose()


def _decode(data: bytes) -> list[Message]:
    obj = orjson.loads(data)
    if isinstance(obj, list):
        return [m for m in obj if isinstance(m, dict)]
    return [obj] if isinstance(obj, dict) else []


class HttpChannel:
    """Streamable HTTP: each message is its own POST to one endpoint URL over a keep-alive pool."""

    kind = "http"

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        pool: Pool | None = None,
        timeout: float | None = 60.0,
    ) -> None:
        self.url = url
        self.endpoint = Endpoint.parse(url)
        self.base_headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **(headers or {}),
        }
        self._own_pool = pool is None
        self.pool = pool or Pool()
        self.timeout = timeout

    @property
    def key(self) -> str:
        """Era cache key: the endpoint (scheme, host, port and path)."""
        ep = self.endpoint
        return f"{ep.scheme}://{ep.host_header}{ep.target}"

    async def exchange(
        self, message: Message, headers: Mapping[str, str] | None = None, *, timeout: float | None = -1.0
    ) -> HttpExchange:
        body = orjson.dumps(message)
        hdrs = {**self.base_headers, **headers} if headers else self.base_headers
        try:
            resp = await self.pool.request(
                "POST", self.endpoint, hdrs, body, timeout=self.timeout if timeout == -1.0 else timeout
            )
        except ConnectionLost as e:
            raise ServerLost(str(e)) from None
        except HttpError as e:
            raise ChannelError(str(e)) from None
        return HttpExchange(resp)

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
        ep = Endpoint.parse(url) if url else self.endpoint
        hdrs = {k: v for k, v in self.base_headers.items() if k != "Content-Type"}
        hdrs.update(headers)
        try:
            return await self.pool.request("GET", ep, hdrs, b"", timeout=self.timeout)
        except HttpError as e:
            raise ChannelError(str(e)) from None

    async def delete(self, headers: Mapping[str, str]) -> None:
        with contextlib.suppress(HttpError):
            resp = await self.pool.request("DELETE", self.endpoint, {**self.base_headers, **headers}, b"",
                                           timeout=5.0)
            await resp.read()

    async def aclose(self) -> None:
        if self._own_pool:
            await self.pool.aclose()


# ---------------------------------------------------------------------------------------------- stdio


_END = object()


class StdioExchange(Exchange):
    __slots__ = ("_chan", "_done", "_queue", "id", "token")

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
                if _is_response(item) and item["id"] == self.id:
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
        self.generation = 0
        self.on_unsolicited: Unsolicited | None = None
        self.on_restart: Callable[[], None] | None = None
        self._by_id: dict[Any, StdioExchange] = {}
        self._by_token: dict[Any, StdioExchange] = {}
        self._reader: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._returncode: int | None = None

    @property
    def key(self) -> str:
        return "stdio:" + shlex.join(self.argv)

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
        self.generation += 1
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
        if _is_response(msg):
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
            if isinstance(meta, dict) and "io.modelcontextprotocol/subscriptionId" in meta:
                ex = self._by_id.get(_k(meta["io.modelcontextprotocol/subscriptionId"]))
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
        token = meta.get("progressToken") if isinstance(meta, dict) else None
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
            self._write({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": request_id, "reason": reason}})

    async def aclose(self) -> None:
        """Close stdin, wait, then SIGTERM, then SIGKILL (REFERENCE.md §9)."""
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


def python_command(*args: str) -> list[str]:
    """argv that runs this interpreter (handy for spawning Python servers)."""
    return [sys.executable, *args]


__all__ = [
    "ChannelError",
    "Exchange",
    "HttpChannel",
    "HttpExchange",
    "HttpStatusError",
    "ServerLost",
    "StdioChannel",
    "StdioExchange",
    "python_command",
]
